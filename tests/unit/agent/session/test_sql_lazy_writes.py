"""The embedded SQLite session layer writes a turn's rows without SQLAlchemy, as SQLAlchemy would.

A session row and chat messages written through `LazySqlSessionStore` (stdlib `sqlite3`) hold the
very values `SqlSessionStore` writes for the same session, and SQLAlchemy reads them back equal; an
older copy never replaces a newer row; a database not made yet is made (with its tables) by the
first write, without Alembic, with the very schema the migrations make; a database at another
schema revision, or a file that is not empty, is left to the real store, which migrates it.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.session.session import ChatSession, PageMessage
from agent.session.stores.sql import SqlSessionStore, sqlite_url
from agent.session.stores.sql_lazy import HEAD, LazySqlSessionStore
from agent.session.stores.sql_lazy_schema import create_at_head


def _session(sid: str, version: int = 1) -> ChatSession:
    at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    return ChatSession(
        session_id=sid,
        agent_id="a",
        tenant_id="t",
        user_id="u",
        version=version,
        created_at=at,
        last_active_time=at + timedelta(seconds=version),
        messages=[PageMessage(role="user", content="héllo", entry_id="e1", ts=at)],
    )


def _rows(db: Path, sid: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (sid,)).fetchall()
        rows += conn.execute("SELECT * FROM chat_messages WHERE session_id = ?", (sid,)).fetchall()
    return rows


def _renamed(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [tuple(v.replace("s-real", "s-lazy") if isinstance(v, str) else v for v in r) for r in rows]


def test_rows_written_without_sqlalchemy_equal_sqlalchemys(tmp_path: Path) -> None:
    real = SqlSessionStore(sqlite_url(tmp_path), create=True)
    real.put(_session("s-real"))
    real.add_messages("t", "s-real", "main", _session("s-real").messages)
    lazy = LazySqlSessionStore(sqlite_url(tmp_path))
    lazy.put(_session("s-lazy"))
    assert lazy.add_messages("t", "s-lazy", "main", _session("s-lazy").messages) == 1
    assert lazy.add_messages("t", "s-lazy", "main", _session("s-lazy").messages) == 0  # kept, not doubled
    assert lazy._real is None  # SQLAlchemy's store was never built

    assert _rows(tmp_path / "agentrt.db", "s-lazy") == _renamed(_rows(tmp_path / "agentrt.db", "s-real"))
    got = real.get("t", "s-lazy")
    assert got is not None and got.created_at == _session("s-lazy").created_at
    assert real.count_messages("t", "s-lazy") == lazy.count_messages("t", "s-lazy") == 1
    assert [m.content for _, m in real.messages("t", "s-lazy")] == ["héllo"]


def test_put_if_newer_never_moves_a_row_back(tmp_path: Path) -> None:
    SqlSessionStore(sqlite_url(tmp_path), create=True).init()
    lazy = LazySqlSessionStore(sqlite_url(tmp_path))
    lazy.put(_session("s-1", version=3))
    lazy.put_if_newer(_session("s-1", version=2))
    assert lazy.get("t", "s-1").version == 3  # type: ignore[union-attr]
    lazy.put_if_newer(_session("s-1", version=4))
    assert lazy.get("t", "s-1").version == 4  # type: ignore[union-attr]
    lazy.put(_session("s-1", version=1))  # put replaces whatever is there
    assert lazy.get("t", "s-1").version == 1  # type: ignore[union-attr]


def test_first_write_makes_the_database_and_its_tables(tmp_path: Path) -> None:
    lazy = LazySqlSessionStore(sqlite_url(tmp_path / "new"))
    assert lazy.count_messages("t", "s-1") == 0
    assert not (tmp_path / "new" / "agentrt.db").exists()  # a count makes nothing
    lazy.put(_session("s-1"))
    assert SqlSessionStore(sqlite_url(tmp_path / "new")).get("t", "s-1") is not None


def _schema(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall()


def test_the_first_write_makes_the_schema_the_migrations_make(tmp_path: Path) -> None:
    SqlSessionStore(sqlite_url(tmp_path / "alembic"), create=True).init()
    lazy = LazySqlSessionStore(sqlite_url(tmp_path / "light"))
    lazy.put(_session("s-1"))
    assert lazy._real is None  # neither SQLAlchemy's store nor Alembic made it
    assert _schema(tmp_path / "light" / "agentrt.db") == _schema(tmp_path / "alembic" / "agentrt.db")
    real = SqlSessionStore(sqlite_url(tmp_path / "light"), create=True)
    assert real.revision() == HEAD
    real.check_schema()
    assert real.get("t", "s-1") is not None


def test_a_file_with_tables_of_its_own_is_left_to_the_real_store(tmp_path: Path) -> None:
    db = tmp_path / "agentrt.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE other (x)")
    assert not create_at_head(db, HEAD)  # nothing added to a database that has tables
    assert [r[1] for r in _schema(db)] == ["other"]
    lazy = LazySqlSessionStore(sqlite_url(tmp_path))
    lazy.put(_session("s-1"))  # the real store migrates it (Alembic adopts the file), then writes
    assert lazy._real is not None
    assert SqlSessionStore(sqlite_url(tmp_path)).revision() == HEAD


def test_a_database_at_another_revision_is_left_to_the_real_store(tmp_path: Path) -> None:
    SqlSessionStore(sqlite_url(tmp_path), create=True).init()
    with sqlite3.connect(tmp_path / "agentrt.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    lazy = LazySqlSessionStore(sqlite_url(tmp_path))
    with pytest.raises(Exception, match="9999"):  # the real store refuses a revision it does not know
        lazy.put(_session("s-1"))
    assert _rows(tmp_path / "agentrt.db", "s-1") == []  # nothing written around the schema step
