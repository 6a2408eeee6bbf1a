"""The record store's tables (`persistence.store: postgres`), on PostgreSQL only.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05

The tables of `checkpointing.store.pg_schema` (record streams, documents, fences, blobs,
reservations), made by the same statements `PostgresStore.setup()` runs, and their migrations
marked as run, so a library user's `setup()` on this database finds nothing left to do. Every
statement is `CREATE ... IF NOT EXISTS`: tables a `setup()` made before are adopted as they are.
SQLite (the embedded default) keeps its records in files: nothing is made there. The tables go to
the configured schema, else the connection's current schema (a URL's `search_path`), where the
runtime looks for them (`agent.session.record_store`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from checkpointing.store.pg_schema import MIGRATIONS, MIGRATIONS_TABLE, ddl

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_TABLES = ("jsonl_records", "jsonl_streams", "jsonl_documents", "jsonl_fences", "jsonl_blobs", "jsonl_reservations")


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
    op.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
    op.execute(MIGRATIONS_TABLE.format(schema=quoted))
    for statement in ddl(schema):
        op.execute(statement)
    for v in range(len(MIGRATIONS)):
        op.execute(f"INSERT INTO {quoted}.jsonl_store_migrations (v) VALUES ({v}) ON CONFLICT DO NOTHING")


def shares_record_store() -> bool:
    """Whether this deployment has a table prefix: the record store's tables belong to the schema,
    shared by every prefix in it, so only the unprefixed deployment's downgrade changes them."""
    return bool(context.config.attributes.get("table_prefix"))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql" or shares_record_store():
        return
    quoted = f'"{_schema()}"'
    for table in (*_TABLES, "jsonl_store_migrations"):
        op.execute(f"DROP TABLE IF EXISTS {quoted}.{table}")
