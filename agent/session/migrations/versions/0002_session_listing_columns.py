"""Listing columns of the sessions table: expiry time, searchable meta, an index by last activity.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-05

The sessions table is the index of sessions where SQL holds every session (MIRROR, or PRIMARY on a
server database): a page is one query ordered by (last_active_time, session_id) with a LIMIT.
`expires_at` lets an ACTIVE row whose expiry has passed list as EXPIRED; `meta` holds the small
JSON of searchable values (first message, turns, the thread metadata). Existing rows are filled
from their session documents.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from alembic import context, op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _prefix() -> str:
    return str(context.config.attributes.get("table_prefix", ""))


def _schema() -> str | None:
    schema = context.config.attributes.get("schema")
    return str(schema) if schema else None


def _fill(doc: dict[str, Any]) -> tuple[datetime | None, str]:
    minutes = float(doc.get("expire_minutes") or 0)
    active = datetime.fromisoformat(str(doc["last_active_time"]))
    expires = active + timedelta(minutes=minutes) if minutes > 0 else None
    first = next((m.get("content", "") for m in doc.get("messages") or [] if m.get("role") == "user"), "")
    metadata = (doc.get("context") or {}).get("thread_metadata")
    meta = {
        "agent_id": doc.get("agent_id"),
        "first_message": str(first)[:500],
        "turns": doc.get("loop_count", 0),
        "last_run_status": doc.get("last_run_status"),
        "branch_id": doc.get("current_branch_id"),
        "metadata": metadata if isinstance(metadata, dict) else {},
    }
    return expires, json.dumps(meta, separators=(",", ":"), ensure_ascii=False)


def upgrade() -> None:
    p, schema = _prefix(), _schema()
    have = sa.inspect(op.get_bind())
    columns = {c["name"] for c in have.get_columns(f"{p}sessions", schema=schema)}
    if not {"expires_at", "meta"} <= columns:  # a schema adopted by 0001 may have them already
        with op.batch_alter_table(f"{p}sessions", schema=schema) as batch:
            if "expires_at" not in columns:
                batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
            if "meta" not in columns:
                batch.add_column(sa.Column("meta", sa.Text, nullable=True))
    if f"ix_{p}sessions_activity" not in {i["name"] for i in have.get_indexes(f"{p}sessions", schema=schema)}:
        op.create_index(
            f"ix_{p}sessions_activity", f"{p}sessions", ["tenant_id", "last_active_time", "session_id"], schema=schema
        )
    t = sa.Table(
        f"{p}sessions",
        sa.MetaData(schema=schema),
        sa.Column("tenant_id", sa.String(64)),
        sa.Column("session_id", sa.String(64)),
        sa.Column("data", sa.Text),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.Column("meta", sa.Text),
    )
    bind = op.get_bind()
    for tenant, sid, data in bind.execute(
        sa.select(t.c.tenant_id, t.c.session_id, t.c.data).where(t.c.meta.is_(None))
    ).all():
        if not data:
            continue
        try:
            expires, meta = _fill(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a damaged document: its next save fills the columns
        bind.execute(
            sa.update(t).where(t.c.tenant_id == tenant, t.c.session_id == sid).values(expires_at=expires, meta=meta)
        )


def downgrade() -> None:
    p, schema = _prefix(), _schema()
    op.drop_index(f"ix_{p}sessions_activity", table_name=f"{p}sessions", schema=schema)
    with op.batch_alter_table(f"{p}sessions", schema=schema) as batch:
        batch.drop_column("meta")
        batch.drop_column("expires_at")
