"""The session lease table (`persistence.lease: postgres`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05

One row per (tenant, session, scope): the current holder (NULL once released), its fencing token
and its expiry. The row outlives every grant, so the token keeps counting up
(`agent.session.lease_postgres`). `scope` is `run` (the session lease) or `drain` (the workers'
drain lease). A table already there (a schema whose version row was lost) is kept as it is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _prefix() -> str:
    return str(context.config.attributes.get("table_prefix", ""))


def _schema() -> str | None:
    schema = context.config.attributes.get("schema")
    return str(schema) if schema else None


def upgrade() -> None:
    p, schema = _prefix(), _schema()
    if sa.inspect(op.get_bind()).has_table(f"{p}session_leases", schema=schema):
        return  # a schema whose version row was lost is adopted as it is (see 0001)
    op.create_table(
        f"{p}session_leases",
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("scope", sa.String(16), primary_key=True, server_default="run"),
        sa.Column("holder", sa.Text, nullable=True),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        schema=schema,
    )


def downgrade() -> None:
    op.drop_table(f"{_prefix()}session_leases", schema=_schema())
