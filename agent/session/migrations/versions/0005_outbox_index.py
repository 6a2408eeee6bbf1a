"""The index of the sessions that owe a layer writes, on the record store (PostgreSQL only).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-06

A partial index of `jsonl_streams` on the sessions holding an `@outbox` stream, so the sweep that
replays what the SQL / Redis layers missed (`agentrt store converge`, the workers, `agentrt serve`)
finds every debtor of every tenant without reading the other streams. The same statement
`PostgresStore.setup()` runs (`checkpointing.store.pg_schema`, migration 3), marked as run.
SQLite (the embedded default) keeps its records in files: nothing is made there.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from checkpointing.store.pg_schema import ddl

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_MIGRATION = 3
"""The index of `pg_schema.MIGRATIONS` this revision applies."""


def _schema() -> str:
    """The configured schema, else the connection's own (a URL's `search_path`, else public)."""
    schema = context.config.attributes.get("schema")
    if schema:
        return str(schema)
    return str(op.get_bind().execute(sa.text("SELECT current_schema()")).scalar() or "public")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema = _schema()
    quoted = f'"{schema}"'
    op.execute(ddl(schema)[_MIGRATION])
    op.execute(f"INSERT INTO {quoted}.jsonl_store_migrations (v) VALUES ({_MIGRATION}) ON CONFLICT DO NOTHING")


def shares_record_store() -> bool:
    """Whether this deployment has a table prefix: the record store's tables belong to the schema,
    shared by every prefix in it, so only the unprefixed deployment's downgrade changes them."""
    return bool(context.config.attributes.get("table_prefix"))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql" or shares_record_store():
        return
    quoted = f'"{_schema()}"'
    op.execute(f"DROP INDEX IF EXISTS {quoted}.jsonl_streams_outbox")
    op.execute(f"DELETE FROM {quoted}.jsonl_store_migrations WHERE v = {_MIGRATION}")
