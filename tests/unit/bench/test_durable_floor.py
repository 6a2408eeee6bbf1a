"""bench/durable_floor.py: what a saver wrote and synced under its folder, replayed elsewhere."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("durable_floor", ROOT / "bench" / "durable_floor.py")
assert _spec is not None and _spec.loader is not None
durable_floor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(durable_floor)


class _State(TypedDict):
    messages: Annotated[list[Any], add_messages]


def _append(path: Path, data: bytes, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def test_the_trace_holds_the_writes_and_syncs_under_the_folder_in_order(tmp_path: Path) -> None:
    """Writes and syncs under the folder, in order; a file elsewhere is left out."""
    root, elsewhere = tmp_path / "saver", tmp_path / "other"
    (root / "run").mkdir(parents=True)
    elsewhere.mkdir()
    with durable_floor.trace(root) as ops:
        _append(root / "run" / "a.jsonl", b"one\n", sync=True)
        _append(elsewhere / "b.jsonl", b"not ours\n", sync=True)
        _append(root / "run" / "a.jsonl", b"two\n", sync=False)
        fd = os.open(root / "run", os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    assert ops == [
        ("w", "run/a.jsonl", b"one\n"),
        ("s", "run/a.jsonl", b""),
        ("w", "run/a.jsonl", b"two\n"),
        ("s", "run", b""),
    ]
    assert durable_floor.summary(ops) == (2, 8, 2)
    assert os.write is not None and os.fdatasync.__module__ == "posix"  # put back


def test_a_replay_writes_the_same_bytes_to_the_same_files(tmp_path: Path) -> None:
    """The replay's folder holds the very bytes the traced folder does."""
    root, copy = tmp_path / "saver", tmp_path / "floor"
    root.mkdir()
    with durable_floor.trace(root) as ops:
        for i in range(3):
            _append(root / f"f{i % 2}.jsonl", f"record {i}\n".encode(), sync=i % 2 == 0)
    seconds = durable_floor.replay(ops, copy)
    assert seconds >= 0
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == {p.name: p.read_bytes() for p in root.iterdir()}


def test_a_graph_run_with_the_replay_saver_appends_the_traced_bytes_and_resumes(tmp_path: Path) -> None:
    """The in-graph floor: a LangGraph run with `ReplaySaver` writes the traced saver's bytes at its
    calls (every byte once the run made as many calls), and a second invoke resumes its state."""
    root, copy = tmp_path / "saver", tmp_path / "floor"
    root.mkdir()
    with durable_floor.trace(root) as ops:
        for i in range(4):
            _append(root / "a.jsonl", f"record {i}\n".encode(), sync=True)
    saver = durable_floor.ReplaySaver(ops, copy)
    b: Any = StateGraph(_State)
    b.add_node("say", lambda s: {"messages": [("ai", f"reply {len(s['messages'])}")]})
    b.add_edge(START, "say")
    graph = b.compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "hi")]}, cfg)
    out = graph.invoke({"messages": [("user", "again")]}, cfg)
    saver.close()
    assert [m.content for m in out["messages"]] == ["hi", "reply 1", "again", "reply 3"]
    assert (copy / "a.jsonl").read_bytes() == (root / "a.jsonl").read_bytes()
