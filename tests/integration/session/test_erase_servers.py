"""`agentrt erase` with the SQL and Redis layers on (real PostgreSQL and Redis, the Redis lease):
the erased tenant's (or user's) rows and keys go, every other tenant's stay and keep working."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from tests.cli.console import agentrt
from tests.integration.test_stores_support import DATABASE_URL, REDIS_URL
from tests.support.runners import make_config

SERVER = DATABASE_URL.rsplit("/", 1)[0]


def _engine(db: str) -> sa.Engine:
    return sa.create_engine(
        f"{SERVER.replace('postgresql://', 'postgresql+psycopg://')}/{db}", isolation_level="AUTOCOMMIT"
    )


@pytest.fixture
def db_url() -> Iterator[str]:
    """A fresh PostgreSQL database (dropped afterwards)."""
    name = f"agentrt_erase_{uuid.uuid4().hex[:10]}"
    admin = _engine("postgres")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield f"{SERVER}/{name}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _rows(db_url: str, tenant: str) -> dict[str, int]:
    engine = _engine(db_url.rsplit("/", 1)[1])
    with engine.connect() as conn:
        got = {
            t: int(conn.execute(sa.text(f"SELECT count(*) FROM {t} WHERE tenant_id = :t"), {"t": tenant}).scalar_one())
            for t in ("sessions", "chat_messages")
        }
    engine.dispose()
    return got


def _keys(client: redis.Redis, tenant: str) -> set[str]:
    return {k.decode() for k in client.scan_iter(match=f"*:{tenant}:*", count=1000)}


@pytest.mark.parametrize("mode", ["MIRROR", "PRIMARY"])
def test_erase_removes_only_that_tenants_rows_and_keys(tmp_path: Path, db_url: str, mode: str) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    a, b = f"A{uuid.uuid4().hex[:8]}", f"B{uuid.uuid4().hex[:8]}"  # tenants no other test uses
    persistence = {"mode": mode, "database_url": db_url, "redis_url": REDIS_URL, "lease": "redis"}
    cfg = str(make_config(tmp_path, persistence=persistence))
    assert agentrt("db", "upgrade", "--config", cfg, cwd=tmp_path).code == 0
    try:
        for tenant, user, sid in ((a, "U1", "s1"), (a, "U2", "s2"), (b, "U1", "s1")):
            ran = agentrt(
                "run", "--config", cfg, "--tenant", tenant, "--user", user, "--new-session", sid,
                "--approve-all", "--json", "Summarise the sales", cwd=tmp_path,
            )  # fmt: skip
            assert ran.code == 0, ran.both
        before_a, before_b, keys_b = _rows(db_url, a), _rows(db_url, b), _keys(client, b)
        assert before_a["sessions"] == 2 and before_a["chat_messages"] > 0
        assert any(k.endswith(":session:s1") for k in _keys(client, a)) and keys_b

        ran = agentrt("erase", "--config", cfg, "--tenant", a, "--user", "U1", "--yes", "--json", cwd=tmp_path)
        assert ran.code == 0, ran.both
        done = json.loads(ran.out)
        assert done["session_ids"] == [f"{a}/s1"] and done["sql_rows"] > 1 and done["redis_keys"] >= 2
        assert _rows(db_url, a)["sessions"] == 1
        assert not [k for k in _keys(client, a) if k.endswith(("s1", "s1:token"))]
        assert _rows(db_url, b) == before_b and _keys(client, b) == keys_b

        ran = agentrt("erase", "--config", cfg, "--tenant", a, "--yes", cwd=tmp_path)
        assert ran.code == 0 and f"deleted {a}/s2" in ran.out, ran.both
        assert _rows(db_url, a) == {"sessions": 0, "chat_messages": 0} and _keys(client, a) == set()
        assert _rows(db_url, b) == before_b and _keys(client, b) == keys_b
        more = agentrt(
            "run", "--config", cfg, "--tenant", b, "--user", "U1", "--session", "s1", "--approve-all", "--json", "More",
            cwd=tmp_path,
        )  # fmt: skip
        assert more.code == 0 and json.loads(more.out)["status"] == "COMPLETED", more.both
    finally:
        for tenant in (a, b):
            keys = list(client.scan_iter(match=f"*:{tenant}:*", count=1000))
            if keys:
                client.delete(*keys)


def test_a_worker_reclaims_old_sessions_after_a_task(tmp_path: Path) -> None:
    """With session.retention_days set, a Celery worker deletes the sessions past it after a task
    (no beat): the old ENDED session goes, the one the turn ran in stays."""
    import time
    from datetime import UTC, datetime, timedelta

    from agent.session.session import ChatSession, SessionStatus
    from agent.session.stores.jsonl import JsonlSessionStore
    from tests.support.celery_drill import open_cluster, turn_script

    c = open_cluster(tmp_path, "redis", turn_script(1), session={"retention_days": 1 / 24})
    try:
        old = datetime.now(UTC) - timedelta(hours=2)
        store = JsonlSessionStore(c.settings.base_dir, fsync="never")
        doc = ChatSession(
            session_id="s-old", agent_id="a", tenant_id=c.tenant, user_id="u", status=SessionStatus.ENDED,
            created_at=old, last_active_time=old, version=1,
        )  # fmt: skip
        store.create_log(doc, sync_dir=False)
        store.put(doc)
        store.index.close()
        folder = c.settings.base_dir / "tenants" / c.tenant / "sessions"
        c.start_worker("w0", concurrency=1)
        turn = c.submit("s-new", "Count").wait(timeout=120)
        assert turn.status == "COMPLETED", turn
        deadline = time.monotonic() + 30
        while (folder / "s-old").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not (folder / "s-old").exists() and (folder / "s-new").is_dir()
    finally:
        c.close()
