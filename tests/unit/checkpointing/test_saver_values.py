"""Drop-in: every value kind LangGraph's own serializer round-trips reads back equal from our saver."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from langchain_core.agents import AgentAction
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Interrupt, Send
from pydantic import BaseModel
from pydantic.v1 import BaseModel as BaseModelV1

from checkpointing.codec import StoredObject
from checkpointing.saver import JsonlCheckpointSaver


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: float
    tags: tuple[str, ...] = ()


class Pair(NamedTuple):
    left: int
    right: str


class Note(BaseModel):
    text: str
    at: dt.datetime
    color: Color = Color.RED


class LegacyNote(BaseModelV1):
    text: str
    n: int = 0


def all_kinds() -> dict[str, Any]:
    """One value of every kind, nested inside each other where LangGraph allows it."""
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    return {
        "enum": Color.BLUE,
        "dataclass": Point(1, 2.5, ("a", "b")),
        "namedtuple": Pair(1, "r"),
        "pydantic": Note(text="n", at=when, color=Color.BLUE),
        "pydantic_v1": LegacyNote(text="old", n=3),
        "set": {1, 2, 3},
        "frozenset": frozenset({"x"}),
        "tuple": (1, (2, "three")),
        "datetime": when,
        "date": when.date(),
        "timedelta": dt.timedelta(seconds=90),
        "uuid": uuid.UUID(int=42),
        "bytes": b"\x00\xff",
        "send": Send("node", {"p": Point(0, 0.0)}),
        "command": Command(goto="n", update={"k": Color.RED}, resume={"i": 1}),
        "interrupt": Interrupt(value={"question": "ok?"}, id="i1"),
        "messages": [HumanMessage("hi", id="h1"), AIMessage("", tool_calls=[{"id": "c", "name": "t", "args": {}}])],
        "tool": ToolMessage("out", tool_call_id="c", artifact={"rows": 2}),
        "agent_action": AgentAction(tool="search", tool_input={"q": "x"}, log="thinking"),
        "nested": {"list": [Point(3, 4.0), {Color.RED: "key is an enum"}]},
    }


ALLOWED = [Color, Point, Pair, Note, LegacyNote]


def _roundtrip(saver: BaseCheckpointSaver, values: dict[str, Any]) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = {k: saver.get_next_version(None, None) for k in values}
    cfg: RunnableConfig = {"configurable": {"thread_id": "v", "checkpoint_ns": ""}}
    stored = saver.put(cfg, cp, {"source": "input", "step": -1}, cp["channel_versions"])
    saver.put_writes(stored, [("__error__", ValueError("boom")), ("x", values["dataclass"])], "task-1")
    return stored


def test_every_value_kind_reads_back_as_in_memory_saver_does(tmp_path: Path) -> None:
    """A fresh saver (a new process) reads every kind back as written, and errors as InMemorySaver does.

    (InMemorySaver's msgpack turns tuples into lists and enum dict keys into their values; ours keeps them.)
    """
    mem = InMemorySaver()
    mem_cfg = _roundtrip(mem, all_kinds())
    cfg = _roundtrip(JsonlCheckpointSaver(tmp_path), all_kinds())
    fresh = JsonlCheckpointSaver(tmp_path, allowed_types=ALLOWED)
    got, want = fresh.get_tuple(cfg), mem.get_tuple(mem_cfg)
    assert got is not None and want is not None
    assert got.checkpoint["channel_values"] == all_kinds()
    assert set(got.checkpoint["channel_values"]) == set(want.checkpoint["channel_values"])
    for key, value in all_kinds().items():
        assert type(got.checkpoint["channel_values"][key]) is type(value), key
    assert [w for w in got.pending_writes if w[1] == "__error__"] == [
        w for w in want.pending_writes if w[1] == "__error__"
    ]
    assert ("task-1", "__error__", "ValueError('boom')") in got.pending_writes


def test_a_type_nobody_allowed_is_a_stand_in_not_an_import(tmp_path: Path) -> None:
    """Read by a process that never saw or allowed the class, a dataclass is an inspectable stand-in."""
    cfg = _roundtrip(JsonlCheckpointSaver(tmp_path), {"dataclass": Point(1, 2.0)})
    fresh = JsonlCheckpointSaver(tmp_path)
    fresh.codec.learn = False
    fresh.codec._allowed.pop(f"{__name__}:Point", None)
    got = fresh.get_tuple(cfg)
    assert got is not None
    stand_in = got.checkpoint["channel_values"]["dataclass"]
    assert stand_in == StoredObject(f"{__name__}:Point", "dataclass", {"x": 1, "y": 2.0, "tags": ()})


@dataclasses.dataclass(frozen=True)
class Cell:
    row: int
    col: int


def test_a_set_of_types_nobody_allowed_reads_back_as_a_set_of_stand_ins(tmp_path: Path) -> None:
    """Frozen dataclasses, enums and namedtuples inside sets and dict keys: stand-ins, not an error."""
    values = {"dataclass": Point(1, 2.0), "cells": {Cell(0, 1), Cell(1, 0)}, "keys": {Color.RED: 1, Pair(2, "b"): 2}}
    cfg = _roundtrip(JsonlCheckpointSaver(tmp_path), values)
    fresh = JsonlCheckpointSaver(tmp_path)
    fresh.codec.learn = False
    fresh.codec._allowed.clear()
    got = fresh.get_tuple(cfg)
    assert got is not None
    stored = got.checkpoint["channel_values"]
    assert stored["cells"] == {
        StoredObject(f"{__name__}:Cell", "dataclass", {"row": r, "col": c}) for r, c in [(0, 1), (1, 0)]
    }
    assert stored["keys"] == {
        StoredObject(f"{__name__}:Color", "enum", "red"): 1,
        StoredObject(f"{__name__}:Pair", "namedtuple", {"left": 2, "right": "b"}): 2,
    }
    allowed = JsonlCheckpointSaver(tmp_path, allowed_types=[*ALLOWED, Cell]).get_tuple(cfg)
    assert allowed is not None and allowed.checkpoint["channel_values"] == values


def test_integers_beyond_64_bits_round_trip(tmp_path: Path) -> None:
    """Big integers (which msgpack refuses) are stored tagged and read back exactly."""
    cfg = _roundtrip(JsonlCheckpointSaver(tmp_path), {"dataclass": Point(1, 2.0), "big": [2**80, -(2**70)]})
    got = JsonlCheckpointSaver(tmp_path).get_tuple(cfg)
    assert got is not None and got.checkpoint["channel_values"]["big"] == [2**80, -(2**70)]


def test_channel_versions_of_any_type_are_kept_as_given(tmp_path: Path) -> None:
    """int, float and string versions (as other savers write them) round-trip, and ours continue
    each in its own type: int + 1, float + 1.0, and a string above the 32-digit one it follows."""
    saver = JsonlCheckpointSaver(tmp_path)
    cp = empty_checkpoint()
    old_str = "00000000000000000000000000000007.0123"
    versions: dict[str, Any] = {"a": 3, "b": 2.5, "c": old_str}
    cp["channel_values"] = {"a": 1, "b": 2, "c": 3}
    cp["channel_versions"] = dict(versions)
    cfg = saver.put({"configurable": {"thread_id": "v", "checkpoint_ns": ""}}, cp, {}, versions)
    got = JsonlCheckpointSaver(tmp_path).get_tuple(cfg)
    assert got is not None and got.checkpoint["channel_versions"] == versions
    assert [type(v) for v in got.checkpoint["channel_versions"].values()] == [int, float, str]
    nxt_int, nxt_float = saver.get_next_version(3, None), saver.get_next_version(2.5, None)
    assert (nxt_int, type(nxt_int)) == (4, int) and (nxt_float, type(nxt_float)) == (3.5, float)
    nxt_str = saver.get_next_version(old_str, None)
    assert nxt_str > old_str and nxt_str > InMemorySaver().get_next_version(None, None)
    assert int(nxt_str.split(".")[0]) == 8 and saver.get_next_version(nxt_str, None) > nxt_str


class GraphState(BaseModel):
    """A pydantic state schema: its field types are allowed automatically by `allow_graph`."""

    notes: list[Note] = []
    where: Point | None = None
    color: Color = Color.RED
    seen: set[str] = set()
    trace: list[Any] = []


def _graph(saver: BaseCheckpointSaver, failures: list[int] | None = None) -> Any:
    failures = [1] if failures is None else failures

    def step(s: GraphState) -> dict[str, Any]:
        n = len(s.notes)
        note = Note(text=f"n{n}", at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=n))
        trace = [*s.trace, (n, uuid.UUID(int=n), b"%d" % n)]
        return {"notes": [*s.notes, note], "where": Point(n, n / 2), "seen": s.seen | {f"s{n}"}, "trace": trace}

    def fail_once(s: GraphState) -> dict[str, Any]:
        if failures:
            failures.pop()
            raise ValueError("first time fails")
        return {"color": Color.BLUE}

    b: Any = StateGraph(GraphState)
    b.add_node("step", step)
    b.add_node("check", fail_once)
    b.add_edge(START, "step")
    b.add_edge("step", "check")
    b.add_edge("check", END)
    return b.compile(checkpointer=saver)


def _run(saver: BaseCheckpointSaver, cfg: RunnableConfig) -> None:
    g = _graph(saver)
    with pytest.raises(ValueError, match="first time"):
        g.invoke(GraphState(), cfg)
    g.invoke(None, cfg)
    g.invoke(GraphState(), cfg)


def test_pydantic_state_graph_matches_in_memory_saver_across_processes(tmp_path: Path) -> None:
    """A pydantic-state graph with a failing node: same state, history and error writes as InMemorySaver."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "g", "tenant_id": "acme"}}
    mem = InMemorySaver()
    _run(mem, cfg)
    _run(JsonlCheckpointSaver(tmp_path), cfg)
    fresh_saver = JsonlCheckpointSaver(tmp_path)
    fresh_saver.codec.learn = False
    fresh_saver.codec._allowed.clear()
    fresh = _graph(fresh_saver, [])
    fresh_saver.allow_graph(fresh)
    want, got = _graph(mem, []).get_state(cfg), fresh.get_state(cfg)
    assert got.values["notes"] == want.values["notes"] and got.values["seen"] == want.values["seen"]
    assert got.values["trace"] == [(0, uuid.UUID(int=0), b"0")]
    assert isinstance(got.values["notes"][0], Note) and isinstance(got.values["where"], Point)
    want_hist = [
        (len(h.values.get("notes", [])), h.next, h.metadata["step"]) for h in _graph(mem, []).get_state_history(cfg)
    ]
    got_hist = [(len(h.values.get("notes", [])), h.next, h.metadata["step"]) for h in fresh.get_state_history(cfg)]
    assert got_hist == want_hist
    errors = [t.pending_writes for t in fresh_saver.list(cfg) if any(w[1] == "__error__" for w in t.pending_writes)]
    assert errors and ("__error__", "ValueError('first time fails')") in [w[1:] for w in errors[0]]


async def test_pydantic_state_graph_async_matches_sync(tmp_path: Path) -> None:
    """The async path stores and reads the same values as the sync one."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "ga"}}
    g = _graph(JsonlCheckpointSaver(tmp_path / "a"))
    with pytest.raises(ValueError, match="first time"):
        await g.ainvoke(GraphState(), cfg)
    await g.ainvoke(None, cfg)
    await g.ainvoke(GraphState(), cfg)
    _run(JsonlCheckpointSaver(tmp_path / "s"), cfg)
    reader = JsonlCheckpointSaver(tmp_path / "a")
    graph = _graph(reader, [])
    reader.allow_graph(graph)
    got = await graph.aget_state(cfg)
    sync_reader = JsonlCheckpointSaver(tmp_path / "s")
    sync_graph = _graph(sync_reader, [])
    sync_reader.allow_graph(sync_graph)
    want = sync_graph.get_state(cfg)
    assert got.values == want.values and isinstance(got.values["notes"][0], Note)
