"""The record store's append writes only its lines (`persistence.store: postgres`), on PostgreSQL only.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06

Applies the record store's migrations that have not run on this database (`checkpointing.store.
pg_schema.MIGRATIONS`, as `PostgresStore.setup()` would, under the same transaction lock): the
stream row loses its end position and line count (a stream ends where its last record row ends,
so existing streams keep their ends), the records lose their foreign key (the append locks the
stream row itself), and `jsonl_append()` is created. Existing rows are kept as they are.
Downgrading puts the columns back, computed from the records, and the foreign key.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from checkpointing.store.pg_schema import MIGRATIONS, MIGRATIONS_TABLE, SETUP_LOCK

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_LEAN = 4
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
    s = f'"{_schema()}"'
    op.execute(
        f"ALTER TABLE {s}.jsonl_streams ADD COLUMN IF NOT EXISTS end_pos bigint, ADD COLUMN IF NOT EXISTS lines bigint"
    )
    op.execute(
        f"UPDATE {s}.jsonl_streams st SET"
        f" end_pos = coalesce((SELECT r.pos + octet_length(r.line) FROM {s}.jsonl_records r"
        " WHERE r.stream = st.id ORDER BY r.pos DESC LIMIT 1), 0),"
        f" lines = (SELECT count(*) FROM {s}.jsonl_records r WHERE r.stream = st.id)"
    )
    op.execute(f"ALTER TABLE {s}.jsonl_streams ALTER COLUMN end_pos SET NOT NULL, ALTER COLUMN lines SET NOT NULL")
    op.execute(
        f"DELETE FROM {s}.jsonl_records r WHERE NOT EXISTS (SELECT FROM {s}.jsonl_streams st WHERE st.id = r.stream)"
    )
    op.execute(
        f"ALTER TABLE {s}.jsonl_records ADD CONSTRAINT jsonl_records_stream_fkey FOREIGN KEY (stream)"
        f" REFERENCES {s}.jsonl_streams (id) ON DELETE CASCADE"
    )
    op.execute(f"DROP FUNCTION IF EXISTS {s}.jsonl_append(text, text, text, bigint, bytea, bytea[], boolean)")
    op.execute(f"DELETE FROM {s}.jsonl_store_migrations WHERE v >= {_LEAN}")
