"""The statements of the PostgreSQL store (`postgres`), with `{s}` for its schema's identifier.

Every value is a bound parameter (`%s`, `%(name)s`); `PostgresStore` composes each statement once
with the quoted schema name. Tables: `pg_schema`.
"""

from __future__ import annotations

from checkpointing.store.base import SESSION_STREAM_PREFIX

RUNS_ONLY = f"left(run, 1) <> '{SESSION_STREAM_PREFIX}'"
"""Session streams are not runs: listings of runs and threads skip them."""
QUERIES: dict[str, str] = {
    "heads": (
        "SELECT run, id, end_pos FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND "
        + RUNS_ONLY
        + " ORDER BY run"
    ),
    "head": "SELECT id, end_pos FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s",
    "stream_id": "SELECT id FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s",
    # A write that changes nothing, so that its synchronous commit flushes the WAL (`sync`).
    "touch": "UPDATE {s}.jsonl_streams SET end_pos = end_pos WHERE id = %s RETURNING end_pos",
    "scan": "SELECT pos, line FROM {s}.jsonl_records WHERE stream = %s AND pos >= %s ORDER BY pos",
    "read": "SELECT pos, line FROM {s}.jsonl_records WHERE stream = %s AND pos = ANY(%s)",
    # The fence's upsert runs first (the stream's waits on its EXISTS), as a transaction of
    # statements would take the two row locks; the insert reads the stream's new end.
    "append": (
        "WITH f AS (INSERT INTO {s}.jsonl_fences AS f (tenant, thread, token)"
        " SELECT %(tenant)s, %(thread)s, %(token)s::bigint WHERE %(token)s::bigint IS NOT NULL"
        " ON CONFLICT (tenant, thread) DO UPDATE SET token = EXCLUDED.token, updated_at = now()"
        " WHERE f.token <= EXCLUDED.token RETURNING f.token),"
        " a AS (INSERT INTO {s}.jsonl_streams AS st (tenant, thread, run, end_pos, lines)"
        " SELECT %(tenant)s, %(thread)s, %(run)s, %(total)s::bigint, %(n)s::bigint"
        " WHERE %(token)s::bigint IS NULL OR EXISTS (SELECT FROM f)"
        " ON CONFLICT (tenant, thread, run) DO UPDATE SET end_pos = st.end_pos + EXCLUDED.end_pos,"
        " lines = st.lines + EXCLUDED.lines RETURNING st.id, st.end_pos - %(total)s::bigint AS start),"
        " i AS (INSERT INTO {s}.jsonl_records (stream, pos, line)"
        " SELECT a.id, a.start + u.off, u.line FROM a, unnest(%(offs)s::bigint[], %(lines)s::bytea[]) AS u(off, line))"
        " SELECT (SELECT id FROM a), (SELECT start FROM a),"
        " CASE WHEN %(quick)s THEN set_config('synchronous_commit', 'off', true) END"
    ),
    # append_if: the stream row locked until commit (a row lock, not a session advisory lock:
    # PgBouncer's transaction pooling keeps it), so the end compared is the end appended at.
    "head_lock": "SELECT id, end_pos FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s FOR UPDATE",
    "advance": "UPDATE {s}.jsonl_streams SET end_pos = end_pos + %s, lines = lines + %s WHERE id = %s",
    "create": (
        "INSERT INTO {s}.jsonl_streams (tenant, thread, run, end_pos, lines) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (tenant, thread, run) DO NOTHING RETURNING id, 0"
    ),
    "insert": "INSERT INTO {s}.jsonl_records (stream, pos, line) SELECT %s, unnest(%s::bigint[]), unnest(%s::bytea[])",
    "drop_run": "DELETE FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s",
    "drop_streams": "DELETE FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s",
    "drop_docs": "DELETE FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s",
    "drop_fence": "DELETE FROM {s}.jsonl_fences WHERE tenant = %s AND thread = %s",
    "doc": "SELECT body, version FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s AND name = %s",
    "doc_new": (
        "INSERT INTO {s}.jsonl_documents (tenant, thread, name, body, version) VALUES (%s, %s, %s, %s, 1)"
        " ON CONFLICT DO NOTHING RETURNING version"
    ),
    "doc_put": (
        "INSERT INTO {s}.jsonl_documents (tenant, thread, name, body, version) VALUES (%s, %s, %s, %s, 1)"
        " ON CONFLICT (tenant, thread, name) DO UPDATE SET body = EXCLUDED.body,"
        " version = {s}.jsonl_documents.version + 1"
    ),
    "doc_drop": "DELETE FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s AND name = %s",
    "doc_cas": (
        "UPDATE {s}.jsonl_documents SET body = %s, version = version + 1"
        " WHERE tenant = %s AND thread = %s AND name = %s AND version = %s RETURNING version"
    ),
    "fence": (
        "INSERT INTO {s}.jsonl_fences AS f (tenant, thread, token) VALUES (%s, %s, %s)"
        " ON CONFLICT (tenant, thread) DO UPDATE SET token = EXCLUDED.token, updated_at = now()"
        " WHERE f.token <= EXCLUDED.token RETURNING f.token"
    ),
    "fence_get": "SELECT token FROM {s}.jsonl_fences WHERE tenant = %s AND thread = %s",
    "reserve": (
        "INSERT INTO {s}.jsonl_reservations (tenant, key, body) VALUES (%s, %s, %s)"
        " ON CONFLICT (tenant, key) DO NOTHING RETURNING 1"
    ),
    "reserved": "SELECT body FROM {s}.jsonl_reservations WHERE tenant = %s AND key = %s",
    "unreserve": "DELETE FROM {s}.jsonl_reservations WHERE tenant = %s AND (%s::text IS NULL OR key = %s)",
    "threads": (
        "SELECT DISTINCT tenant, thread FROM {s}.jsonl_streams"
        " WHERE (%s::text IS NULL OR tenant = %s) AND (%s::text IS NULL OR thread = %s) AND "
        + RUNS_ONLY
        + " ORDER BY tenant, thread"
    ),
    "streams_all": "SELECT run, id FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s ORDER BY run",
    "any_rows": (
        "SELECT EXISTS (SELECT FROM {s}.jsonl_streams WHERE tenant = %(t)s AND thread = %(th)s)"
        " OR EXISTS (SELECT FROM {s}.jsonl_documents WHERE tenant = %(t)s AND thread = %(th)s)"
    ),
    "docs_all": "SELECT name, body FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s ORDER BY name",
    "holding": "SELECT thread FROM {s}.jsonl_streams WHERE tenant = %s AND run = %s ORDER BY thread",
    # The literal, not a parameter: it is the predicate of the partial index jsonl_streams_outbox.
    "outbox_holders": "SELECT tenant, thread FROM {s}.jsonl_streams WHERE run = '@outbox' ORDER BY tenant, thread",
    "outbox_holding": "SELECT thread FROM {s}.jsonl_streams WHERE tenant = %s AND run = '@outbox' ORDER BY thread",
}
