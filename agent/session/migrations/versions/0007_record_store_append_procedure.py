"""The record store's append takes the session's advisory lock instead of row locks (PostgreSQL only).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07

Applies the record store's migrations that have not run on this database (`checkpointing.store.
pg_schema.MIGRATIONS`, as `PostgresStore.setup()` would, under the same transaction lock): the
append becomes the procedure `jsonl_append` (run by `CALL`), which holds the session's
transaction-scoped advisory lock shared instead of locking the fence and stream rows, and the
function of the same name goes. No table changes: every row stays as it is. Stop the processes of
the older agentrt before upgrading: their appends call the function, and fail without it.
Downgrading drops the procedure and creates the function again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from checkpointing.store.pg_schema import MIGRATIONS, MIGRATIONS_TABLE, SETUP_LOCK

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_PROCEDURE = 5
"""The store migration this revision brings (its index in `MIGRATIONS`)."""
_FUNCTION = 4
"""The store migration whose function it replaces."""


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
    args = "text, text, text, bigint, bytea, bytea[], boolean, bigint, bigint"
    op.execute(f"DROP PROCEDURE IF EXISTS {quoted}.jsonl_append({args})")
    op.execute(MIGRATIONS[_FUNCTION].format(schema=quoted))
    op.execute(f"DELETE FROM {quoted}.jsonl_store_migrations WHERE v >= {_PROCEDURE}")
