"""Layers going down mid-use: Redis killed by pid, PostgreSQL cut off; degrade or fail as the mode says."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.core.errors import BackendUnavailable
from agent.session.manager import ChatSessionManager
from agent.session.stores.jsonl import JsonlSessionStore
from agent.session.stores.memory_cache import MemorySessionStore
from agent.session.stores.redis import RedisSessionStore
from agent.session.stores.sql import SqlSessionStore
from tests.integration.test_stores_support import (
    DATABASE_URL,
    OwnedRedis,
    Relay,
    build_manager,
    free_port,
    pg_host_port,
    sql_store,
)


@pytest.fixture
def owned_redis() -> Iterator[OwnedRedis]:
    """A redis-server only this test talks to; killed by pid at the end."""
    server = OwnedRedis()
    server.start()
    yield server
    server.kill()


@pytest.fixture
def relay() -> Iterator[Relay]:
    """A cuttable TCP relay in front of the shared PostgreSQL."""
    r = Relay(*pg_host_port())
    r.restore()
    yield r
    r.cut()


@pytest.fixture
def relayed_sql(relay: Relay) -> Iterator[SqlSessionStore]:
    """Private PostgreSQL tables reached through the relay; dropped directly afterwards."""
    store = sql_store(relay.url_for(DATABASE_URL))
    yield store
    store.dispose()
    direct = SqlSessionStore(DATABASE_URL, table_prefix=store.sessions.name[: -len("sessions")])
    direct.drop()
    direct.dispose()


def down_warnings(caplog: pytest.LogCaptureFixture, layer: str) -> int:
    """How many 'layer is down' warnings were logged for `layer`."""
    return sum(1 for r in caplog.records if r.levelno == logging.WARNING and f"layer {layer} is down" in r.message)


def turn(m: ChatSessionManager, tenant: str, sid: str, text: str) -> None:
    """One user turn and answer on the page history, then a save (what a run does to the session)."""
    s = m.get(tenant, sid)
    m.start_turn(s)
    m.memory.add_user_turn(s, text)
    m.memory.add_assistant_message(s, f"re: {text}")
    m.save(s)


def test_redis_killed_mid_use_degrades_then_refills(
    owned_redis: OwnedRedis, relayed_sql: SqlSessionStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PRIMARY keeps working with Redis dead (one warning), and Redis gets every write back once it returns."""
    l2 = RedisSessionStore(owned_redis.url, socket_timeout=1)
    m = build_manager("PRIMARY", tmp_path, l2, relayed_sql)
    m.create("t1", "agent", "u1", "a")
    turn(m, "t1", "a", "before")
    owned_redis.kill()
    caplog.set_level(logging.WARNING, "agentrt.sessions")
    turn(m, "t1", "a", "during 1")
    m.create("t1", "agent", "u1", "b")
    turn(m, "t1", "b", "during 2")
    m.l1.clear()
    got = m.get("t1", "a")
    assert ("L2", "down") in m.last_read_trace and m.last_read_trace[-1] == ("JSONL", "hit")
    assert [x.content for x in got.messages][-2:] == ["during 1", "re: during 1"]
    assert down_warnings(caplog, "L2") == 1
    assert m.layer_status()["L2"].startswith("down")

    owned_redis.start()  # a fresh, empty server on the same port
    m.l1.clear()
    m.get("t1", "a")
    assert m.last_read_trace[:2] == [("L1", "miss"), ("L2", "hit")]
    for sid in ("a", "b"):
        cached = l2.get("t1", sid)
        assert cached is not None and cached.version == relayed_sql.get("t1", sid).version  # type: ignore[union-attr]
    assert m.layer_status()["L2"] == "up"


def test_sql_cut_off_in_primary_loses_nothing(
    relay: Relay, relayed_sql: SqlSessionStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PRIMARY saves to JSONL while SQL is unreachable, warns once, and refills SQL (rows too) afterwards."""
    m = build_manager("PRIMARY", tmp_path, None, relayed_sql)
    m.create("t1", "agent", "u1", "a")
    relay.cut()
    caplog.set_level(logging.WARNING, "agentrt.sessions")
    turn(m, "t1", "a", "while down")
    m.create("t1", "agent", "u1", "b")
    turn(m, "t1", "b", "b while down")
    m.l1.clear()
    assert [x.content for x in m.get("t1", "a").messages] == ["while down", "re: while down"]
    assert down_warnings(caplog, "SQL") == 1

    relay.restore()
    s = m.get("t1", "a")  # a hit in L1 does not touch SQL; a save does
    m.save(s)
    for sid, text in (("a", "while down"), ("b", "b while down")):
        row = relayed_sql.get("t1", sid)
        assert row is not None and row.version == m.jsonl.get("t1", sid).version  # type: ignore[union-attr]
        assert [x.content for _, x in relayed_sql.messages("t1", sid)] == [text, f"re: {text}"]


def test_sql_down_in_mirror_falls_back_to_the_jsonl_mirror(
    relay: Relay, relayed_sql: SqlSessionStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """MIRROR with its SQL source unreachable saves to the JSONL mirror and reads it, then refills SQL."""
    m = build_manager("MIRROR", tmp_path, None, relayed_sql)
    m.create("t1", "agent", "u1", "a")
    relay.cut()
    caplog.set_level(logging.WARNING, "agentrt.sessions")
    turn(m, "t1", "a", "x")
    m.l1.clear()
    got = m.get("t1", "a")
    assert m.last_read_trace == [("L1", "miss"), ("SQL", "down"), ("JSONL", "hit")]
    assert got.loop_count == 1
    relay.restore()
    m.l1.clear()
    got = m.get("t1", "a")
    assert m.last_read_trace == [("L1", "miss"), ("SQL", "hit")]
    assert got.loop_count == 1 and [x.content for x in got.messages] == ["x", "re: x"]
    assert [x.content for _, x in relayed_sql.messages("t1", "a")] == ["x", "re: x"]
    assert down_warnings(caplog, "SQL") == 1


def test_unreachable_database_url_degrades_primary(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A PostgreSQL URL on a closed port: PRIMARY still creates and runs sessions on JSONL, with one warning."""
    dead = SqlSessionStore(f"postgresql://postgres@127.0.0.1:{free_port()}/test", connect_timeout=1)
    caplog.set_level(logging.WARNING, "agentrt.sessions")
    m = build_manager("PRIMARY", tmp_path, None, dead)
    m.create("t1", "agent", "u1", "a")
    turn(m, "t1", "a", "hello")
    m.l1.clear()
    assert m.get("t1", "a").loop_count == 1
    assert down_warnings(caplog, "SQL") == 1
    assert "1 pending" in m.layer_status()["SQL"]


def break_base_dir(tmp_path: Path, tenant: str) -> None:
    """Replace the tenant's sessions folder by a file, so every JSONL write fails."""
    sessions = tmp_path / "tenants" / tenant / "sessions"
    os.rename(sessions, tmp_path / "moved-away")
    sessions.write_text("not a folder")


def test_no_durable_layer_left_fails_clearly(relay: Relay, relayed_sql: SqlSessionStore, tmp_path: Path) -> None:
    """JSONL_ONLY with its disk broken, and MIRROR with SQL and disk gone, refuse the save with BackendUnavailable."""
    only = build_manager("JSONL_ONLY", tmp_path / "j", None, None)
    s = only.create("t1", "agent", "u1", "a")
    break_base_dir(tmp_path / "j", "t1")
    with pytest.raises(BackendUnavailable, match="no durable layer"):
        only.save(s)
    assert s.version == 1  # the failed save did not count

    mirror = build_manager("MIRROR", tmp_path / "m", None, relayed_sql)
    s = mirror.create("t1", "agent", "u1", "a")
    relay.cut()
    break_base_dir(tmp_path / "m", "t1")
    with pytest.raises(BackendUnavailable, match="not saved"):
        mirror.save(s)


def test_redis_copy_missed_during_an_outage_is_never_read_by_the_next_process(tmp_path: Path) -> None:
    """Redis (behind a relay) misses a save, the process "dies" (its memory is gone), Redis returns
    with the older copy still in it: the next manager replays the outbox first and reads the newest."""
    from tests.integration.test_stores_support import REDIS_URL, drop_redis_prefix, redis_store

    host, port = REDIS_URL.split("//", 1)[1].split("/", 1)[0].split(":")
    redis_relay = Relay(host, int(port))
    redis_relay.restore()
    direct = redis_store()
    prefix = direct.key_prefix
    try:
        relayed = RedisSessionStore(f"redis://127.0.0.1:{redis_relay.port}", key_prefix=prefix, socket_timeout=1)
        first = build_manager("PRIMARY", tmp_path, relayed, None)
        first.create("t1", "agent", "u1", "a")
        turn(first, "t1", "a", "cached")
        stale = direct.get("t1", "a")
        assert stale is not None
        redis_relay.cut()
        turn(first, "t1", "a", "missed by redis")
        assert first.outbox.pending_layers("t1", "a") == {"L2"}
        first._retrier.stop()  # the process dies: its background retrier replays nothing more
        deadline = time.monotonic() + 10
        while first._retrier.running and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not first._retrier.running
        redis_relay.restore()
        direct.put(stale)  # as if the delete-before-write had not happened: the older copy is there
        second = build_manager("PRIMARY", tmp_path, relayed, None)  # the next process
        got = second.get("t1", "a")
        assert [x.content for x in got.messages][-2:] == ["missed by redis", "re: missed by redis"]
        assert ("L2", "hit") not in second.last_read_trace
        assert second.outbox.pending_layers("t1", "a") == set()
        refilled = direct.get("t1", "a")
        assert refilled is not None and refilled.version == got.version
    finally:
        redis_relay.cut()
        drop_redis_prefix(direct.client, prefix)


def test_redis_back_is_refilled_by_the_background_retry_without_another_call(
    owned_redis: OwnedRedis, relayed_sql: SqlSessionStore, tmp_path: Path
) -> None:
    """Saves that miss Redis are owed in the outbox (the doctor's count); once Redis is back the
    process's background retry writes the newest copy to it and empties the outbox, with no
    further call on the manager (a long run does not wait for its next save)."""
    l2 = RedisSessionStore(owned_redis.url, socket_timeout=1)
    m = ChatSessionManager(
        "PRIMARY",
        MemorySessionStore(),
        l2,
        relayed_sql,
        JsonlSessionStore(tmp_path),
        retry_interval_s=0.3,
    )
    m.create("acme", "agent", "u1", "a")
    owned_redis.kill()
    turn(m, "acme", "a", "while Redis is down")
    behind = m.behind("acme", "a")
    assert list(behind) == ["L2"] and behind["L2"].changes >= 2 and behind["L2"].since
    assert m.outbox.due("acme") == ["a"]

    owned_redis.start()  # a fresh, empty server on the same port
    deadline = time.monotonic() + 20
    while m.outbox.owes("acme", "a") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not m.outbox.owes("acme", "a") and m.outbox.due("acme") == []
    newest = m.jsonl.get("acme", "a")
    cached = l2.get("acme", "a")
    assert newest is not None and cached is not None and cached.version == newest.version
