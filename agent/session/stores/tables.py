"""The session tables, defined once: what the queries use and what the migrations must make.

The Alembic scripts in agent/session/migrations are the history of how a database got here; this
metadata is where it is now. `tests/integration/store/test_schema_agreement.py` migrates an empty
database (SQLite and PostgreSQL) and compares it with this metadata through Alembic's
autogenerate, so a change to one without the other fails the suite. The PostgreSQL record store's
tables (the checkpoint and event-log records) are raw SQL with their own versioned DDL
(`checkpointing`), not listed here.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa


@dataclass(frozen=True)
class SessionTables:
    """The tables of one store (one `table_prefix` in one schema), in their own `MetaData`."""

    metadata: sa.MetaData
    sessions: sa.Table
    """(tenant_id, session_id) -> the listing columns and `data`, the session document."""
    chat_messages: sa.Table
    """(tenant_id, session_id, message_id) -> the page history rows (`message_id`: the event-log entry)."""
    session_leases: sa.Table
    """(tenant_id, session_id, scope) -> who holds the session's lease, its fencing token and expiry."""


def session_tables(table_prefix: str = "", schema: str | None = None) -> SessionTables:
    """The newest schema of the session tables named with `table_prefix` in `schema`."""
    p = table_prefix
    metadata = sa.MetaData(schema=schema)
    sessions = sa.Table(
        f"{p}sessions",
        metadata,
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_active_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("meta", sa.Text, nullable=True),
        sa.Index(f"ix_{p}sessions_user", "tenant_id", "user_id"),
        sa.Index(f"ix_{p}sessions_activity", "tenant_id", "last_active_time", "session_id"),
    )
    chat_messages = sa.Table(
        f"{p}chat_messages",
        metadata,
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("message_id", sa.String(64), primary_key=True),
        sa.Column("branch_id", sa.String(64), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Index(f"ix_{p}chat_messages_session", "tenant_id", "session_id", "ts"),
    )
    session_leases = sa.Table(
        f"{p}session_leases",
        metadata,
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("scope", sa.String(16), primary_key=True, server_default="run"),
        sa.Column("holder", sa.Text, nullable=True),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    return SessionTables(metadata, sessions, chat_messages, session_leases)
