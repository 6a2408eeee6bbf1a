"""Branches on real Redis + PostgreSQL: fork at an earlier entry; the original branch stays byte-identical."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.session.manager import ChatSessionManager, Mode
from agent.session.session import ChatSession
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


def run_turn(m: ChatSessionManager, s: ChatSession, text: str, result: str) -> None:
    """What a run writes: the user turn, a tool call and its (large) result, the answer; then a save."""
    m.start_turn(s)
    m.memory.add_user_turn(s, text)
    m.memory.record(s, "run_start", {"run_id": f"run-{text}"})
    m.memory.record(s, "tool_call", {"tool_call_id": f"call-{text}", "name": "read_file", "args": {"p": "a"}})
    m.memory.record(s, "tool_result", {"tool_call_id": f"call-{text}", "content": result})
    m.memory.add_assistant_message(s, f"answer to {text}")
    m.memory.record(s, "run_end", {"run_id": f"run-{text}"})
    m.save(s)


def blob_files(base: Path) -> dict[str, bytes]:
    """Every blob file under base with its bytes."""
    return {str(p): p.read_bytes() for p in (base / "blobs").rglob("*") if p.is_file()}


@pytest.mark.parametrize("mode", ["MIRROR", "PRIMARY"])
def test_fork_then_turn_leaves_the_original_branch_untouched(mode: Mode, tmp_path: Path, layers: tuple) -> None:
    """After fork + a new turn, old entries, tool results and blobs are byte-identical; both projections right."""
    m = build_manager(mode, tmp_path, layers[0], layers[1])
    s = m.create("t1", "agent", "u1", "s1")
    run_turn(m, s, "one", "R1" * 6000)
    fork_point = s.current_leaf_entry_id
    run_turn(m, s, "two", "R2" * 6000)
    old_leaf, old_branch = s.current_leaf_entry_id, s.current_branch_id
    events = m.event_log("t1", "s1")
    before_bytes = events.path.read_bytes()
    before_blobs = blob_files(tmp_path)
    old_path = [events.raw(e.id) for e in events.path_to_root(old_leaf)]
    old_results = [e.payload for e in events.path_to_root(old_leaf) if e.type == "tool_result"]

    new_branch = m.fork(s, fork_point or "", reason="retry turn two", extra={"checkpoint_id": "cp-1"})
    run_turn(m, s, "two-bis", "R3" * 6000)

    assert events.path.read_bytes()[: len(before_bytes)] == before_bytes
    assert {k: v for k, v in blob_files(tmp_path).items() if k in before_blobs} == before_blobs
    assert [events.raw(e.id) for e in events.path_to_root(old_leaf)] == old_path
    assert [e.payload for e in events.path_to_root(old_leaf) if e.type == "tool_result"] == old_results

    m.l1.clear()
    layers[0].delete("t1", "s1")
    now = m.get("t1", "s1")
    assert (now.current_branch_id, now.current_leaf_entry_id) == (new_branch, s.current_leaf_entry_id)
    texts = [x.content for x in now.messages]
    assert texts == ["one", "answer to one", "two-bis", "answer to two-bis"]
    assert [x.content for x in m.memory.sql_history(now)] == texts
    old_view = now.model_copy(update={"current_leaf_entry_id": old_leaf, "current_branch_id": old_branch})
    assert [x.content for x in m.history(old_view)] == ["one", "answer to one", "two", "answer to two"]
    created = [e for e in events.entries() if e.type == "branch_created"]
    assert len(created) == 1 and created[0].parent_id == fork_point
    assert created[0].payload["from_leaf_entry_id"] == old_leaf
    assert created[0].payload["checkpoint_id"] == "cp-1"
    assert set(events.branches()) == {"main", new_branch}
