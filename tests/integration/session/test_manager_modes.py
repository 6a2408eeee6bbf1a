"""Each persistence mode on real Redis + PostgreSQL: where a session is written, read order, fill-on-miss."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.core.errors import SessionNotFound
from agent.session.manager import ChatSessionManager, Mode
from agent.session.stores.redis import RedisSessionStore
from agent.session.stores.sql import SqlSessionStore
from tests.integration.test_stores_support import build_manager, drop_redis_prefix, redis_store, sql_store


@pytest.fixture
def layers() -> Iterator[tuple[RedisSessionStore, SqlSessionStore]]:
    """Private Redis prefix and PostgreSQL tables, removed afterwards."""
    l2, l3 = redis_store(), sql_store()
    yield l2, l3
    drop_redis_prefix(l2.client, l2.key_prefix)
    l3.drop()
    l3.dispose()


def make(mode: Mode, tmp_path: Path, layers: tuple[RedisSessionStore, SqlSessionStore]) -> ChatSessionManager:
    """A manager of `mode` over the test's layers."""
    return build_manager(mode, tmp_path, layers[0], layers[1])


def held_by(m: ChatSessionManager, tenant: str, sid: str) -> set[str]:
    """Names of the layers that hold the session right now."""
    out = set()
    for layer in [m.l1, m.l2, m.sql, m.jsonl]:
        if layer is not None and layer.get(tenant, sid) is not None:
            out.add(layer.name)
    return out


@pytest.mark.parametrize(
    ("mode", "where"),
    [
        ("MIRROR", {"L1", "L2", "SQL", "JSONL"}),
        ("PRIMARY", {"L1", "L2", "SQL", "JSONL"}),
        ("JSONL_ONLY", {"L1", "L2", "JSONL"}),
    ],
)
def test_save_writes_the_layers_of_the_mode(mode: Mode, where: set[str], tmp_path: Path, layers: tuple) -> None:
    """A created and saved session lands in exactly the layers its mode writes."""
    m = make(mode, tmp_path, layers)
    s = m.create("t1", "agent", "u1", "s1")
    assert held_by(m, "t1", "s1") == where
    s.context["k"] = "v"
    m.save(s)
    for name in where:
        layer = {"L1": m.l1, "L2": m.l2, "SQL": layers[1], "JSONL": m.jsonl}[name]
        got = layer.get("t1", "s1")
        assert got is not None and got.context == {"k": "v"} and got.version == s.version
    if mode == "JSONL_ONLY":
        assert layers[1].get("t1", "s1") is None


def drop(m: ChatSessionManager, layers: tuple, name: str) -> None:
    """Remove the session from one layer (for JSONL: the session file and the event log)."""
    if name == "L1":
        m.l1.delete("t1", "s1")
    elif name == "L2":
        layers[0].delete("t1", "s1")
    elif name == "SQL":
        layers[1].delete("t1", "s1")
    else:
        m.jsonl.delete("t1", "s1")
        m.event_log("t1", "s1").path.unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("mode", "order"),
    [
        ("MIRROR", ["L1", "L2", "SQL"]),
        ("PRIMARY", ["L1", "L2", "JSONL", "SQL"]),
        ("JSONL_ONLY", ["L1", "L2", "JSONL"]),
    ],
)
def test_read_order_proven_by_removing_one_layer_at_a_time(
    mode: Mode, order: list[str], tmp_path: Path, layers: tuple
) -> None:
    """Removing the session from each layer in turn moves the hit to the next layer of the mode."""
    m = make(mode, tmp_path, layers)
    m.create("t1", "agent", "u1", "s1")
    for depth, name in enumerate(order):
        m.get("t1", "s1", "u1")
        assert m.last_read_trace == [(n, "miss") for n in order[:depth]] + [(name, "hit")]
        # Remove it from this layer and every layer above (which the read just refilled).
        for upper in order[: depth + 1]:
            drop(m, layers, upper)
    with pytest.raises(SessionNotFound):
        m.get("t1", "s1")
    assert m.last_read_trace == [(n, "miss") for n in order]


@pytest.mark.parametrize("mode", ["MIRROR", "PRIMARY", "JSONL_ONLY"])
def test_a_miss_fills_the_upper_layers(mode: Mode, tmp_path: Path, layers: tuple) -> None:
    """A hit in the lowest layer writes the session back into every layer above it."""
    m = make(mode, tmp_path, layers)
    m.create("t1", "agent", "u1", "s1")
    m.l1.delete("t1", "s1")
    layers[0].delete("t1", "s1")
    if mode == "PRIMARY":
        m.jsonl.delete("t1", "s1")
        m.event_log("t1", "s1").path.unlink(missing_ok=True)
    m.get("t1", "s1")
    assert m.last_read_trace[-1][1] == "hit"
    assert m.l1.get("t1", "s1") is not None and layers[0].get("t1", "s1") is not None
    if mode == "PRIMARY":
        assert m.jsonl.get("t1", "s1") is not None
    m.get("t1", "s1")
    assert m.last_read_trace == [("L1", "hit")]


def test_mirror_reads_the_sql_source_not_a_stale_jsonl_copy(tmp_path: Path, layers: tuple) -> None:
    """In MIRROR a session deleted from SQL is gone even though its JSONL mirror remains."""
    m = make("MIRROR", tmp_path, layers)
    m.create("t1", "agent", "u1", "s1")
    m.l1.delete("t1", "s1")
    layers[0].delete("t1", "s1")
    layers[1].delete("t1", "s1")
    assert m.jsonl.get("t1", "s1") is not None
    with pytest.raises(SessionNotFound):
        m.get("t1", "s1")


def test_list_comes_from_the_source_of_truth(tmp_path: Path, layers: tuple) -> None:
    """list() shows every session of the tenant/user even when the caches are empty."""
    for mode in ("MIRROR", "PRIMARY", "JSONL_ONLY"):
        base = tmp_path / mode
        m = build_manager(mode, base, layers[0], layers[1])
        m.create("tl", "agent", "u1", f"{mode}-a")
        m.create("tl", "agent", "u2", f"{mode}-b")
        m.l1.clear()
        names = [s.session_id for s in m.list("tl")]
        assert f"{mode}-a" in names and f"{mode}-b" in names
        assert [s.session_id for s in m.list("tl", "u2") if s.session_id.startswith(mode)] == [f"{mode}-b"]


def test_threads_sharing_one_manager_lose_nothing(tmp_path: Path, layers: tuple) -> None:
    """Eight threads creating, turning and reading their own sessions at once all end up complete."""
    import threading

    m = make("PRIMARY", tmp_path, layers)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(15):
                s = m.create(f"tenant{n}", "agent", "u", f"s{i}")
                m.start_turn(s)
                m.memory.add_user_turn(s, f"hello {n}/{i}")
                m.save(s)
                assert m.get(f"tenant{n}", f"s{i}", "u").messages[-1].content == f"hello {n}/{i}"
        except BaseException as err:  # surfaced below: a thread's assert must fail the test
            errors.append(err)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    m.l1.clear()
    for n in range(8):
        listed = m.list(f"tenant{n}")
        assert len(listed) == 15 and all(s.loop_count == 1 and len(s.messages) == 1 for s in listed)
        assert all(layers[1].get(f"tenant{n}", s.session_id) == s for s in listed)
    assert all(state == "up" for state in m.layer_status().values())
