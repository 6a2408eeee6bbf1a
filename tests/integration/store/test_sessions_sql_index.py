"""Where SQL holds every session (MIRROR; PRIMARY on a server database) the session table is the
listing's index: `agentrt sessions` pages it with ORDER BY / LIMIT, filters, computes EXPIRED at
read, and never needs the files index. Real PostgreSQL, one database per test."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from agent.session.manager import open_manager
from agent.session.session import THREAD_METADATA
from checkpointing.layout import session_index_file
from checkpointing.session_index import RowFilter
from tests.cli.console import agentrt
from tests.integration.test_stores_support import DATABASE_URL
from tests.support.runners import make_config

SERVER = DATABASE_URL.rsplit("/", 1)[0]
T0 = datetime.now(UTC) - timedelta(hours=1)


def _admin() -> sa.Engine:
    return sa.create_engine(
        SERVER.replace("postgresql://", "postgresql+psycopg://") + "/postgres", isolation_level="AUTOCOMMIT"
    )


@pytest.fixture
def db_url() -> Iterator[str]:
    """A fresh PostgreSQL database (dropped afterwards)."""
    name = f"agentrt_index_{uuid.uuid4().hex[:10]}"
    engine = _admin()
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield f"{SERVER}/{name}"
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.mark.parametrize("mode", ["MIRROR", "PRIMARY"])
def test_sql_table_is_the_index(tmp_path: Path, db_url: str, mode: str) -> None:
    """Pages by cursor cover every session once; --status/--meta/--tenant filter; EXPIRED at read;
    no files index is read or made; the API's search filters run on the same table."""
    cfg = make_config(tmp_path, persistence={"mode": mode, "database_url": db_url, "redis_url": None, "lease": "file"})
    assert agentrt("db", "upgrade", "--config", str(cfg), cwd=tmp_path).code == 0
    manager = open_manager(mode, tmp_path / "agentrt", database_url=db_url, fsync="never")  # type: ignore[arg-type]
    ids = []
    for i in range(12):
        context = {THREAD_METADATA: {"project": "q3" if i % 3 == 0 else "q4"}}
        s = manager.create(
            "default", "agentrt", "user", f"s{i:02d}", context=context, last_active_time=T0 + timedelta(seconds=i)
        )
        ids.append(s.session_id)
    manager.create("default", "agentrt", "user", "old", expire_minutes=1, last_active_time=T0 - timedelta(hours=1))
    manager.create("acme", "agentrt", "user", "theirs")
    session_index_file(tmp_path / "agentrt").unlink(missing_ok=True)  # the files index plays no part here

    def listed(*args: str) -> list[dict[str, object]]:
        ran = agentrt("sessions", "--config", str(cfg), "--json", *args, cwd=tmp_path)
        assert ran.code == 0, ran.both
        rows: list[dict[str, object]] = json.loads(ran.out)
        return rows

    seen: list[object] = []
    after: list[str] = []
    while rows := listed("--limit", "5", *after):
        seen += [r["session_id"] for r in rows]
        after = ["--after", str(rows[-1]["cursor"])]
    assert seen == [*reversed(ids), "old"]
    assert [r["session_id"] for r in listed("--status", "EXPIRED")] == ["old"]
    assert "old" not in [r["session_id"] for r in listed("--status", "ACTIVE", "--limit", "0")]
    assert [r["session_id"] for r in listed("--meta", "project=q3")] == ["s09", "s06", "s03", "s00"]
    assert [r["session_id"] for r in listed("--tenant", "acme")] == ["theirs"]
    assert [r["session_id"] for r in listed("--tenant", "acme", "--user", "bob")] == []
    bad = agentrt("sessions", "--config", str(cfg), "--after", "nope", cwd=tmp_path)
    assert bad.code == 2 and "--after" in bad.error_line()
    assert not session_index_file(tmp_path / "agentrt").exists()

    q3 = manager.search(
        "default", RowFilter(meta=[(("metadata", "project"), "q3")]), order="session_id", descending=False, limit=2
    )
    assert isinstance(q3, list) and [r.session_id for r in q3] == ["s00", "s03"]
    assert manager.search("default", RowFilter(meta=[(("metadata", "project"), "q3")]), count_only=True) == 4
    assert manager.search("default", RowFilter(meta_not=[(("last_run_status",), ["FAILED"])]), count_only=True) == 13
    assert manager.search("acme", RowFilter(ids=["s00"]), count_only=True) == 0
