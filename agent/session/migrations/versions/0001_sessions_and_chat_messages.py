"""The sessions and chat_messages tables (the shapes agentrt had before migrations).

Revision ID: 0001
Revises:
Create Date: 2026-12-03

A database whose tables were made by an agentrt without migrations (`metadata.create_all`) already
has both tables in this exact shape: they are adopted as they are, only the version row is added.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _prefix() -> str:
    return str(context.config.attributes.get("table_prefix", ""))


def _schema() -> str | None:
    schema = context.config.attributes.get("schema")
    return str(schema) if schema else None


def upgrade() -> None:
    p, schema = _prefix(), _schema()
    have = sa.inspect(op.get_bind())
    if not have.has_table(f"{p}sessions", schema=schema):
        op.create_table(
            f"{p}sessions",
            sa.Column("tenant_id", sa.String(64), primary_key=True),
            sa.Column("session_id", sa.String(64), primary_key=True),
            sa.Column("agent_id", sa.String(255), nullable=False),
            sa.Column("user_id", sa.String(255), nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("last_active_time", sa.DateTime(timezone=True), nullable=False),
            sa.Column("data", sa.Text, nullable=False),
            schema=schema,
        )
        op.create_index(f"ix_{p}sessions_user", f"{p}sessions", ["tenant_id", "user_id"], schema=schema)
    if not have.has_table(f"{p}chat_messages", schema=schema):
        op.create_table(
            f"{p}chat_messages",
            sa.Column("tenant_id", sa.String(64), primary_key=True),
            sa.Column("session_id", sa.String(64), primary_key=True),
            sa.Column("message_id", sa.String(64), primary_key=True),
            sa.Column("branch_id", sa.String(64), nullable=False),
            sa.Column("role", sa.String(32), nullable=False),
            sa.Column("content", sa.Text, nullable=False),
            sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
            schema=schema,
        )
        op.create_index(
            f"ix_{p}chat_messages_session",
            f"{p}chat_messages",
            ["tenant_id", "session_id", "ts"],
            schema=schema,
        )


def downgrade() -> None:
    p, schema = _prefix(), _schema()
    op.drop_table(f"{p}chat_messages", schema=schema)
    op.drop_table(f"{p}sessions", schema=schema)
