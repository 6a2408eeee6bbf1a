"""Channel versions: a thread started with any saver's version type goes on under the JSONL saver."""

from __future__ import annotations

import operator
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from checkpointing.saver import JsonlCheckpointSaver

CFG: RunnableConfig = {"configurable": {"thread_id": "versions"}}
INPUTS = [{"log": [f"in{i}"]} for i in range(5)]
FIRST = 2  # invocations made by the saver that started the thread


def _extend(state: list, batches: Any) -> list:
    out = list(state or [])
    for batch in batches:
        out.extend(batch)
    return out


class State(TypedDict, total=False):
    log: Annotated[list, operator.add]
    hist: Annotated[list, DeltaChannel(_extend, snapshot_frequency=3)]
    n: int


def _graph(saver: BaseCheckpointSaver) -> Any:
    def count(s: State) -> dict[str, Any]:
        n = s.get("n", 0)
        return {"log": [f"count{n}"], "hist": [n], "n": n + 1}

    def echo(s: State) -> dict[str, Any]:
        return {"log": [f"echo{s['n']}"], "hist": [f"seen{len(s.get('hist', []))}"]}

    b: Any = StateGraph(State)
    b.add_node("count", count)
    b.add_node("echo", echo)
    b.add_edge(START, "count")
    b.add_edge("count", "echo")
    b.add_edge("echo", END)
    return b.compile(checkpointer=saver)


class IntVersionSaver(JsonlCheckpointSaver):
    """A saver with LangGraph's default versions (None -> 1, n -> n + 1), as BaseCheckpointSaver."""

    def get_next_version(self, current: Any, channel: None = None) -> Any:
        return BaseCheckpointSaver.get_next_version(self, current, channel)


class FloatVersionSaver(JsonlCheckpointSaver):
    """A saver with float versions (None -> 1.0, x -> x + 1.0)."""

    def get_next_version(self, current: Any, channel: None = None) -> Any:
        return 1.0 if current is None else float(current) + 1.0


def _uninterrupted() -> dict[str, Any]:
    g = _graph(InMemorySaver())
    for inp in INPUTS:
        g.invoke(inp, CFG)
    return dict(g.get_state(CFG).values)


def _continue(base_dir: Path) -> dict[str, Any]:
    """The remaining invocations, each by a fresh plain saver (a new process), and the state read by another."""
    for inp in INPUTS[FIRST:]:
        _graph(JsonlCheckpointSaver(base_dir)).invoke(inp, CFG)
    state = _graph(JsonlCheckpointSaver(base_dir)).get_state(CFG)
    assert state.next == ()
    return dict(state.values)


def _version_types(base_dir: Path) -> set[type]:
    latest = JsonlCheckpointSaver(base_dir).get_tuple(CFG)
    assert latest is not None
    return {type(v) for v in latest.checkpoint["channel_versions"].values()}


@pytest.mark.parametrize(("first_saver", "kind"), [(IntVersionSaver, int), (FloatVersionSaver, float)])
def test_thread_with_numeric_versions_continues_under_the_plain_saver(
    tmp_path: Path, first_saver: type[JsonlCheckpointSaver], kind: type
) -> None:
    """Started by a saver with int (or float) versions, the thread goes on to the same state as one run."""
    g = _graph(first_saver(tmp_path))
    for inp in INPUTS[:FIRST]:
        g.invoke(inp, CFG)
    assert _version_types(tmp_path) == {kind}
    assert _continue(tmp_path) == _uninterrupted()
    assert _version_types(tmp_path) == {kind}


def _copy_into(saver: JsonlCheckpointSaver, source: list[CheckpointTuple]) -> None:
    """Write another saver's checkpoints (oldest first) and their pending writes with put / put_writes."""
    versions: dict[str | None, dict[str, Any]] = {None: {}}
    for t in source:
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        before = versions[parent]
        now = t.checkpoint["channel_versions"]
        new_versions = {k: v for k, v in now.items() if before.get(k) != v}
        cfg: RunnableConfig = {"configurable": {**CFG["configurable"], "checkpoint_ns": "", "checkpoint_id": parent}}
        stored = saver.put(cfg, t.checkpoint, t.metadata, new_versions)
        versions[t.checkpoint["id"]] = dict(now)
        by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
        for task_id, channel, value in t.pending_writes or []:
            by_task[task_id].append((channel, value))
        for task_id, writes in by_task.items():
            saver.put_writes(stored, writes, task_id)


def test_thread_copied_from_in_memory_saver_continues(tmp_path: Path) -> None:
    """InMemorySaver's checkpoints (32-digit string versions) put into our saver go on to the same state."""
    mem = InMemorySaver()
    g = _graph(mem)
    for inp in INPUTS[:FIRST]:
        g.invoke(inp, CFG)
    _copy_into(JsonlCheckpointSaver(tmp_path), list(reversed(list(mem.list(CFG)))))
    copied = _graph(JsonlCheckpointSaver(tmp_path)).get_state(CFG)
    assert copied.values == g.get_state(CFG).values
    assert _continue(tmp_path) == _uninterrupted()
    latest = JsonlCheckpointSaver(tmp_path).get_tuple(CFG)
    assert latest is not None
    assert all(isinstance(v, str) for v in latest.checkpoint["channel_versions"].values())
