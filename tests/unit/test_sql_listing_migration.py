"""Migration 0002 on a database that already holds sessions: the listing columns are filled from the
documents, and the table then lists them (SQLite, the embedded default)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from agent.session.session import THREAD_METADATA, ChatSession
from agent.session.stores import schema_version as schema
from agent.session.stores.sql import SqlSessionStore
from agent.session.stores.sql_listing import search, sessions_page
from checkpointing.session_index import RowFilter


def test_rows_written_before_0002_are_filled_and_listed(tmp_path: Path) -> None:
    """A 0001 table with two sessions (one idle past its expiry) upgrades to HEAD with meta and
    expires_at filled; filters and EXPIRED-at-read then work on those rows."""
    url = f"sqlite:///{tmp_path / 'agentrt.db'}"
    engine = sa.create_engine(url)
    schema.upgrade(engine, target="0001")
    old = datetime.now(UTC) - timedelta(hours=2)
    docs = [
        ChatSession(session_id="a", agent_id="x", tenant_id="t", user_id="u", last_active_time=old, expire_minutes=5),
        ChatSession(
            session_id="b", agent_id="x", tenant_id="t", user_id="u", context={THREAD_METADATA: {"project": "q3"}}
        ),
    ]
    table = sa.table(
        "sessions",
        *(sa.column(c) for c in ("tenant_id", "session_id", "agent_id", "user_id", "status", "version")),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("last_active_time", sa.DateTime(timezone=True)),
        sa.column("data"),
    )
    with engine.begin() as conn:
        for s in docs:
            conn.execute(
                sa.insert(table).values(
                    tenant_id=s.tenant_id,
                    session_id=s.session_id,
                    agent_id=s.agent_id,
                    user_id=s.user_id,
                    status=s.status.value,
                    version=1,
                    created_at=s.created_at,
                    last_active_time=s.last_active_time,
                    data=s.to_json(),
                )
            )
    assert schema.upgrade(engine) == "0001"
    store = SqlSessionStore(url, engine=engine)
    assert [(s.session_id, st) for s, st in sessions_page(store, "t")] == [("b", "ACTIVE"), ("a", "EXPIRED")]
    assert [s.session_id for s, _ in sessions_page(store, "t", RowFilter(status="EXPIRED"))] == ["a"]
    rows = search(store, "t", RowFilter(meta=[(("metadata", "project"), "q3")]))
    assert isinstance(rows, list) and [r.session_id for r in rows] == ["b"]
    assert search(store, "other", count_only=True) == 0
    engine.dispose()
