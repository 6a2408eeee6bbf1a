"""The PostgreSQL store's tables, as an append-only list of migrations.

    jsonl_streams     one row per stream: (tenant, thread, run); `id` is the stream's identity
                      (a new one when the run is rewritten); the stream ends where its last
                      record row ends (no column to rewrite on every append);
                      `run` is a run id, or a session stream's reserved name (`@events`, see
                      `base.SESSION_STREAMS`: outside the id alphabet, so never a run's)
    jsonl_records     one row per record: (stream, pos) -> the framed JSONL line, newline and
                      checksum included, exactly the bytes the `files` store writes at `pos`
    jsonl_documents   small documents (pins.json, a stream's persisted index: `runs/<run>/
                      checkpoints.jsonl.idx`, `events.jsonl.idx`) as one framed
                      line, with a version for compare-and-swap
    jsonl_fences      the highest lease token granted per session (tenant, thread)
    jsonl_blobs       content-addressed blobs (`pg_blobs`): ref `sha256:<hex>` -> body, size
    jsonl_reservations  ids claimed once per tenant (a turn id -> its session: `Store.reserve`),
                      the value one framed line
    jsonl_store_migrations   which of `MIGRATIONS` ran
    jsonl_append      the append, a procedure (`PostgresSessionStreams.append`): fence, stream,
                      lines, under the session's advisory lock held shared (`SESSION_LOCK`)
    jsonl_append_at   the same for one line at a stream end the writer knows, checked

`jsonl_streams_outbox` indexes the sessions that hold an `@outbox` stream (what a layer still
owes), so finding every debtor of the store (`PostgresStore.outbox_holders`) reads that index only.

`PostgresStore.setup()` applies what has not run yet (under a transaction-scoped advisory lock,
so concurrent setups take turns; nothing session-scoped, so it works through PgBouncer). For a
deployment that runs its schema changes with Alembic instead, `ddl(schema)` gives the same
statements as plain SQL, for a migration's `op.execute`.
"""

from __future__ import annotations

import re

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS {schema}.jsonl_streams (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant text NOT NULL,
        thread text NOT NULL,
        run text NOT NULL,
        end_pos bigint NOT NULL,
        lines bigint NOT NULL,
        UNIQUE (tenant, thread, run)
    );
    CREATE TABLE IF NOT EXISTS {schema}.jsonl_records (
        stream bigint NOT NULL REFERENCES {schema}.jsonl_streams (id) ON DELETE CASCADE,
        pos bigint NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (stream, pos)
    );
    CREATE TABLE IF NOT EXISTS {schema}.jsonl_documents (
        tenant text NOT NULL,
        thread text NOT NULL,
        name text NOT NULL,
        body bytea NOT NULL,
        version bigint NOT NULL,
        PRIMARY KEY (tenant, thread, name)
    );
    CREATE TABLE IF NOT EXISTS {schema}.jsonl_fences (
        tenant text NOT NULL,
        thread text NOT NULL,
        token bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, thread)
    );
    """,
    """
    CREATE TABLE IF NOT EXISTS {schema}.jsonl_blobs (
        ref text PRIMARY KEY,
        body bytea NOT NULL,
        size bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
    );
    """,
    """
    CREATE TABLE IF NOT EXISTS {schema}.jsonl_reservations (
        tenant text NOT NULL,
        key text NOT NULL,
        body bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, key)
    );
    """,
    """
    CREATE INDEX IF NOT EXISTS jsonl_streams_outbox ON {schema}.jsonl_streams (tenant, thread)
        WHERE run = '@outbox';
    """,
    # An append writes one row per line and nothing else: a stream's end is where its last line
    # ends (so no end position or line count to rewrite on the stream row), the session's fence is
    # locked (`FOR SHARE`) rather than rewritten unless the token advances, and the stream row is
    # locked (`FOR KEY SHARE`) instead of checked by a foreign key per line (its records go with it
    # because every statement deleting streams deletes their records after it). `jsonl_append` is
    # that append as one function, so its statements' plans are cached by each server process
    # (nothing a client prepares: it works behind PgBouncer's transaction pooling).
    """
    ALTER TABLE {schema}.jsonl_records DROP CONSTRAINT IF EXISTS jsonl_records_stream_fkey;
    ALTER TABLE {schema}.jsonl_streams DROP COLUMN IF EXISTS end_pos, DROP COLUMN IF EXISTS lines;
    CREATE OR REPLACE FUNCTION {schema}.jsonl_append(
        p_tenant text, p_thread text, p_run text, p_token bigint, p_line bytea, p_more bytea[], p_quick boolean,
        OUT o_stream bigint, OUT o_start bigint
    ) LANGUAGE plpgsql AS $fn$
    DECLARE
        held bigint;
        made boolean = false;
    BEGIN
        IF p_quick THEN
            PERFORM set_config('synchronous_commit', 'off', true);
        END IF;
        IF p_token IS NOT NULL THEN
            SELECT f.token INTO held FROM {schema}.jsonl_fences f
                WHERE f.tenant = p_tenant AND f.thread = p_thread FOR SHARE;
            IF held IS NULL OR held < p_token THEN
                INSERT INTO {schema}.jsonl_fences AS f (tenant, thread, token) VALUES (p_tenant, p_thread, p_token)
                    ON CONFLICT (tenant, thread) DO UPDATE SET token = EXCLUDED.token, updated_at = now()
                    WHERE f.token <= EXCLUDED.token RETURNING f.token INTO held;
            END IF;
            IF held IS DISTINCT FROM p_token THEN
                RETURN;
            END IF;
        END IF;
        SELECT s.id INTO o_stream FROM {schema}.jsonl_streams s
            WHERE s.tenant = p_tenant AND s.thread = p_thread AND s.run = p_run FOR KEY SHARE;
        IF o_stream IS NULL THEN
            INSERT INTO {schema}.jsonl_streams (tenant, thread, run) VALUES (p_tenant, p_thread, p_run)
                ON CONFLICT (tenant, thread, run) DO NOTHING RETURNING id INTO o_stream;
            made = o_stream IS NOT NULL;
            IF NOT made THEN
                SELECT s.id INTO o_stream FROM {schema}.jsonl_streams s
                    WHERE s.tenant = p_tenant AND s.thread = p_thread AND s.run = p_run FOR KEY SHARE;
            END IF;
        END IF;
        o_start = 0;
        IF NOT made THEN
            SELECT r.pos + octet_length(r.line) INTO o_start FROM {schema}.jsonl_records r
                WHERE r.stream = o_stream ORDER BY r.pos DESC LIMIT 1;
            o_start = coalesce(o_start, 0);
        END IF;
        INSERT INTO {schema}.jsonl_records (stream, pos, line) VALUES (o_stream, o_start, p_line);
        IF p_more IS NOT NULL THEN
            INSERT INTO {schema}.jsonl_records (stream, pos, line)
                SELECT o_stream, o_start + octet_length(p_line)
                    + coalesce(sum(octet_length(m.line))
                        OVER (ORDER BY m.n ROWS UNBOUNDED PRECEDING EXCLUDE CURRENT ROW), 0),
                    m.line
                FROM unnest(p_more) WITH ORDINALITY AS m(line, n);
        END IF;
    END
    $fn$;
    """,
    # An append takes no row lock: it holds the session's transaction-scoped advisory lock shared
    # (`SESSION_LOCK`; kept in the lock table, nothing written to a page or the WAL), and whatever
    # must not overlap an append (raising the fence, rewriting or deleting a stream, a session)
    # takes it exclusive first. The usual append (its fence at the token, its stream there) is
    # then one statement that checks the fence, finds the stream's end and inserts the line; the
    # rest (a new stream, more lines) follows it. A fence at another token (or none) returns
    # (NULL, NULL) and writes nothing: the client raises the fence, or refuses the write
    # (`PostgresSessionStreams.append`). A procedure, run by `CALL`: no query around it to plan
    # and no result set to materialise, a third of the server's work per append. The function
    # of migration 4 goes: a process still calling it fails rather than append without the lock.
    """
    DROP FUNCTION IF EXISTS {schema}.jsonl_append(text, text, text, bigint, bytea, bytea[], boolean);
    CREATE OR REPLACE PROCEDURE {schema}.jsonl_append(
        p_tenant text, p_thread text, p_run text, p_token bigint, p_line bytea, p_more bytea[], p_quick boolean,
        INOUT o_stream bigint DEFAULT NULL, INOUT o_start bigint DEFAULT NULL
    ) LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM pg_advisory_xact_lock_shared(hashtext('{schema}'), hashtext(p_tenant || '/' || p_thread)),
            CASE WHEN p_quick THEN set_config('synchronous_commit', 'off', true) END;
        INSERT INTO {schema}.jsonl_records (stream, pos, line)
            SELECT s.id, coalesce((SELECT r.pos + octet_length(r.line) FROM {schema}.jsonl_records r
                WHERE r.stream = s.id ORDER BY r.pos DESC LIMIT 1), 0), p_line
            FROM {schema}.jsonl_streams s
            WHERE s.tenant = p_tenant AND s.thread = p_thread AND s.run = p_run
                AND (p_token IS NULL OR EXISTS (SELECT FROM {schema}.jsonl_fences f
                    WHERE f.tenant = p_tenant AND f.thread = p_thread AND f.token = p_token))
            RETURNING stream, pos INTO o_stream, o_start;
        IF o_stream IS NULL THEN
            IF p_token IS NOT NULL THEN
                PERFORM FROM {schema}.jsonl_fences f
                    WHERE f.tenant = p_tenant AND f.thread = p_thread AND f.token = p_token;
                IF NOT FOUND THEN
                    RETURN;
                END IF;
            END IF;
            INSERT INTO {schema}.jsonl_streams (tenant, thread, run) VALUES (p_tenant, p_thread, p_run)
                ON CONFLICT (tenant, thread, run) DO NOTHING RETURNING id INTO o_stream;
            o_start = 0;
            IF o_stream IS NULL THEN
                SELECT s.id, coalesce((SELECT r.pos + octet_length(r.line) FROM {schema}.jsonl_records r
                    WHERE r.stream = s.id ORDER BY r.pos DESC LIMIT 1), 0) INTO o_stream, o_start
                FROM {schema}.jsonl_streams s WHERE s.tenant = p_tenant AND s.thread = p_thread AND s.run = p_run;
            END IF;
            INSERT INTO {schema}.jsonl_records (stream, pos, line) VALUES (o_stream, o_start, p_line);
        END IF;
        IF p_more IS NOT NULL THEN
            INSERT INTO {schema}.jsonl_records (stream, pos, line)
                SELECT o_stream, o_start + octet_length(p_line)
                    + coalesce(sum(octet_length(m.line))
                        OVER (ORDER BY m.n ROWS UNBOUNDED PRECEDING EXCLUDE CURRENT ROW), 0),
                    m.line
                FROM unnest(p_more) WITH ORDINALITY AS m(line, n);
        END IF;
    END
    $fn$;
    """,
    # The usual append again, for a writer that knows where the stream ends (its own last append
    # left it there): `jsonl_append_at` takes the stream's row id and that end, checks both (the
    # stream's last row ends there, the fence is at the token) under the session's lock held
    # shared, and inserts the line there; nothing to find by name, no result row to send. When
    # either check fails it writes nothing and raises SQLSTATE `JS001`: the writer runs
    # `jsonl_append` instead. A stream that was cut, rewritten or dropped since (a new row id, no
    # rows) or appended to by another writer fails the first check; two writers racing for one
    # end collide on the rows' key.
    """
    CREATE OR REPLACE PROCEDURE {schema}.jsonl_append_at(
        p_tenant text, p_thread text, p_token bigint, p_stream bigint, p_pos bigint, p_line bytea, p_quick boolean
    ) LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM pg_advisory_xact_lock_shared(hashtext('{schema}'), hashtext(p_tenant || '/' || p_thread)),
            CASE WHEN p_quick THEN set_config('synchronous_commit', 'off', true) END;
        INSERT INTO {schema}.jsonl_records (stream, pos, line)
            SELECT p_stream, p_pos, p_line
            WHERE (SELECT r.pos + octet_length(r.line) FROM {schema}.jsonl_records r
                    WHERE r.stream = p_stream ORDER BY r.pos DESC LIMIT 1) = p_pos
                AND (p_token IS NULL OR EXISTS (SELECT FROM {schema}.jsonl_fences f
                    WHERE f.tenant = p_tenant AND f.thread = p_thread AND f.token = p_token));
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'JS001',
                MESSAGE = 'the stream does not end at the given position, or the fence is not at the token';
        END IF;
    END
    $fn$;
    """,
)
"""Schema changes, oldest first; never edit one that shipped, append a new one."""

SESSION_LOCK = "hashtext('{s}'), hashtext(%s || '/' || %s)"
"""The key of a session's transaction-scoped advisory lock (schema, then tenant and thread, bound),
as `jsonl_append` and `jsonl_append_at` compute it: an append holds it shared, a fence raise or a rewrite exclusive.
Two sessions whose keys collide only wait for each other."""

MOVED = "JS001"
"""The SQLSTATE `jsonl_append_at` raises when the stream does not end where the writer said, or the
fence is not at its token (nothing was written)."""

MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS {schema}.jsonl_store_migrations (v integer PRIMARY KEY)"
SETUP_LOCK = 0x6A736F6E_73746F72  # "jsonstor": the advisory lock key setup() takes per transaction
_SCHEMA = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def schema_name(schema: str) -> str:
    """`schema`, checked to be a plain identifier (letters, digits, _; at most 63)."""
    if not _SCHEMA.match(schema):
        raise ValueError(f"PostgreSQL schema name {schema!r}: use letters, digits and _ (at most 63)")
    return schema


def ddl(schema: str = "public") -> list[str]:
    """Every migration's SQL for `schema`, for an Alembic migration (`op.execute` each)."""
    quoted = f'"{schema_name(schema)}"'
    return [m.format(schema=quoted) for m in MIGRATIONS]
