"""The PostgreSQL store's tables, as an append-only list of migrations.

    jsonl_streams     one row per stream: (tenant, thread, run), its end position and line
                      count; `id` is the stream's identity (a new one when the run is rewritten);
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
)
"""Schema changes, oldest first; never edit one that shipped, append a new one."""

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
