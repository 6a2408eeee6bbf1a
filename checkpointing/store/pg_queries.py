"""The statements of the PostgreSQL store (`postgres`), with `{s}` for its schema's identifier.

Every value is a bound parameter (`%s`, `%(name)s`); `PostgresStore` composes each statement once
with the quoted schema name. Tables: `pg_schema`.
"""

from __future__ import annotations

from checkpointing.store.base import SESSION_STREAM_PREFIX
from checkpointing.store.pg_schema import SESSION_LOCK

END = (
    "coalesce((SELECT r.pos + octet_length(r.line) FROM {s}.jsonl_records r"
    " WHERE r.stream = s.id ORDER BY r.pos DESC LIMIT 1), 0)"
)
"""A stream's end (stream row `s`): where its last record row ends, 0 when it has none."""

RUNS_ONLY = f"left(run, 1) <> '{SESSION_STREAM_PREFIX}'"
"""Session streams are not runs: listings of runs and threads skip them."""
QUERIES: dict[str, str] = {
    "heads": (
        "SELECT s.run, s.id, "
        + END
        + " FROM {s}.jsonl_streams s WHERE s.tenant = %s AND s.thread = %s AND "
        + RUNS_ONLY
        + " ORDER BY run"
    ),
    "head": "SELECT s.id, " + END + " FROM {s}.jsonl_streams s WHERE s.tenant = %s AND s.thread = %s AND s.run = %s",
    # A stream's end: where its last row ends (read after the stream row is locked, in a statement
    # of its own, so that its snapshot sees every append that held the row before).
    "end": "SELECT " + END.replace("s.id", "%s"),
    "stream_id": "SELECT id FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s",
    # A write (a row lock is WAL-logged) so that its synchronous commit flushes the WAL (`sync`).
    "touch": "SELECT s.id, " + END + " FROM {s}.jsonl_streams s WHERE s.id = %s FOR KEY SHARE",
    "scan": "SELECT pos, line FROM {s}.jsonl_records WHERE stream = %s AND pos >= %s ORDER BY pos",
    "read": "SELECT pos, line FROM {s}.jsonl_records WHERE stream = %s AND pos = ANY(%s)",
    # The whole append (`pg_schema`'s procedure `jsonl_append`): (stream id, start), (NULL, NULL)
    # when the fence is not at the token.
    "append": "CALL {s}.jsonl_append(%s, %s, %s, %s, %s, %s, %s, NULL, NULL)",
    # The same, with libpq's own placeholders (`pg_libpq` sends it without psycopg's adaptation).
    "append_now": "CALL {s}.jsonl_append($1, $2, $3, $4, $5, $6, $7, NULL, NULL)",
    # One line at the end the writer's last append left (`pg_schema`'s `jsonl_append_at`: SQLSTATE
    # JS001, nothing written, when the stream does not end there or the fence is not at the token).
    "append_at": "CALL {s}.jsonl_append_at($1, $2, $3, $4, $5, $6, $7)",
    # append_if, replace_if: the stream row locked until commit (a row lock, not a session advisory
    # lock: PgBouncer's transaction pooling keeps it), so no other of them slips in between.
    "head_lock": "SELECT id FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s FOR UPDATE",
    "create": (
        "INSERT INTO {s}.jsonl_streams (tenant, thread, run) VALUES (%s, %s, %s)"
        " ON CONFLICT (tenant, thread, run) DO NOTHING RETURNING id"
    ),
    "insert": "INSERT INTO {s}.jsonl_records (stream, pos, line) SELECT %s, unnest(%s::bigint[]), unnest(%s::bytea[])",
    # Streams first (waiting for the appends that hold their rows), then, in a statement of its
    # own that sees those appends' rows, their records.
    "drop_run": "DELETE FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s RETURNING id",
    "drop_streams": "DELETE FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s RETURNING id",
    "drop_records": "DELETE FROM {s}.jsonl_records WHERE stream = ANY(%s)",
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
    # Raising the fence waits for the session's appends in flight (they hold its advisory lock
    # shared), and the appends that wait for it then read the token it wrote.
    "fence": (
        "WITH l AS (SELECT pg_advisory_xact_lock(" + SESSION_LOCK + "))"
        " INSERT INTO {s}.jsonl_fences AS f (tenant, thread, token) SELECT %s, %s, %s FROM l"
        " ON CONFLICT (tenant, thread) DO UPDATE SET token = EXCLUDED.token, updated_at = now()"
        " WHERE f.token <= EXCLUDED.token RETURNING f.token"
    ),
    # First in a transaction that rewrites or deletes streams or the fence: no append is in flight
    # in the session until it commits.
    "lock_session": "SELECT pg_advisory_xact_lock(" + SESSION_LOCK + ")",
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
    "doc_tenants": "SELECT tenant FROM {s}.jsonl_documents WHERE thread = %s AND name = %s ORDER BY tenant",
    "docs_all": "SELECT name, body FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s ORDER BY name",
    "holding": "SELECT thread FROM {s}.jsonl_streams WHERE tenant = %s AND run = %s ORDER BY thread",
    # The literal, not a parameter: it is the predicate of the partial index jsonl_streams_outbox.
    "outbox_holders": "SELECT tenant, thread FROM {s}.jsonl_streams WHERE run = '@outbox' ORDER BY tenant, thread",
    "outbox_holding": "SELECT thread FROM {s}.jsonl_streams WHERE tenant = %s AND run = '@outbox' ORDER BY thread",
}
