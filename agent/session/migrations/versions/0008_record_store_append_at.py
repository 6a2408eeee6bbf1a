"""The record store's append of one line at a known stream end, `jsonl_append_at` (PostgreSQL only).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07

Applies the record store's migrations that have not run on this database (`checkpointing.store.
pg_schema.MIGRATIONS`, as `PostgresStore.setup()` would, under the same transaction lock): the
procedure `jsonl_append_at` is created, the append of a writer that knows where the stream ends
(it checks that end and the fence, and inserts the line there). No table changes, and
`jsonl_append` stays: processes of the older agentrt go on appending through it. Downgrading
drops the procedure.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from checkpointing.store.pg_schema import MIGRATIONS, MIGRATIONS_TABLE, SETUP_LOCK

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_APPEND_AT = 6
"""The store migration this revision brings (its index in `MIGRATIONS`)."""


def _schema() -> str:
    """The configured schema, else the connection's own (a URL's `search_path`, else public)."""
    schema = context.config.attributes.get("schema")
    if schema:
        return str(schema)
    return str(op.get_bind().execute(sa.text("SELECT current_schema()")).scalar() or "public")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    quoted = f'"{_schema()}"'
    op.execute(f"SELECT pg_advisory_xact_lock({SETUP_LOCK})")
    op.execute(MIGRATIONS_TABLE.format(schema=quoted))
    done = {int(v) for (v,) in op.get_bind().execute(sa.text(f"SELECT v FROM {quoted}.jsonl_store_migrations"))}
    for v, statement in enumerate(MIGRATIONS):
        if v not in done:
            op.execute(statement.format(schema=quoted))
            op.execute(f"INSERT INTO {quoted}.jsonl_store_migrations (v) VALUES ({v})")


def shares_record_store() -> bool:
    """Whether this deployment has a table prefix: the record store's tables belong to the schema,
    shared by every prefix in it, so only the unprefixed deployment's downgrade changes them."""
    return bool(context.config.attributes.get("table_prefix"))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql" or shares_record_store():
        return
    quoted = f'"{_schema()}"'
    op.execute(f"SELECT pg_advisory_xact_lock({SETUP_LOCK})")
    op.execute(f"DROP PROCEDURE IF EXISTS {quoted}.jsonl_append_at(text, text, bigint, bigint, bigint, bytea, boolean)")
    op.execute(f"DELETE FROM {quoted}.jsonl_store_migrations WHERE v >= {_APPEND_AT}")
