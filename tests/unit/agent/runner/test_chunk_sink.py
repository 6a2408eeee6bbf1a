"""A caller gets the graph's raw chunks by passing a sink to the runner (`chunks=`), never by subclassing it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.types import StreamMode

from agent.core.config import load_settings
from agent.core.results import RunEvent
from agent.runner import GRAPH_EVENT, AgentRunner, GraphChunks
from tests.support.runners import make_config

SCRIPT = [
    {"content": '{"plan": "p", "todos": ["x"]}'},
    {"tool_calls": [{"name": "calculator", "args": {"expression": "2*21"}}]},
    {"content": "forty two"},
]


@dataclass
class ValuesSink:
    """Keeps the state after each step (LangGraph's `values` mode) and adds nothing to the stream."""

    modes: tuple[StreamMode, ...] = ("values",)
    subgraphs: bool = False
    seen: list[tuple[tuple[str, ...], str, Any]] = field(default_factory=list)

    def __call__(self, ns: tuple[str, ...], mode: str, chunk: Any) -> list[RunEvent]:
        self.seen.append((ns, mode, chunk))
        return []


def test_a_sink_sees_every_chunk_of_the_modes_it_asked_for(tmp_path: Path) -> None:
    """The sink gets the graph's `values` chunks (the last holds the answer); the run's own events
    and result are those of a runner without a sink."""
    sink = ValuesSink()
    runner = AgentRunner(load_settings(make_config(tmp_path, SCRIPT)), chunks=sink)
    events = list(runner.stream("compute"))
    assert events[-1].kind == "final" and events[-1].data["answer"] == "forty two"
    assert GRAPH_EVENT not in {ev.kind for ev in events}
    modes = {mode for _, mode, _ in sink.seen}
    assert {"values", "updates", "checkpoints"} <= modes
    values = [chunk for _, mode, chunk in sink.seen if mode == "values"]
    assert values[-1]["messages"][-1].content == "forty two"


def test_graph_chunks_put_each_chunk_in_the_stream_before_its_events(tmp_path: Path) -> None:
    """With `GraphChunks` (what the server and the workers pass) every chunk is an event of the
    stream, `messages` included (tokens come from it), and a node's event follows its chunk."""
    runner = AgentRunner(load_settings(make_config(tmp_path, SCRIPT)), chunks=GraphChunks())
    events = list(runner.stream("compute"))
    assert events[-1].data["answer"] == "forty two"
    raw = [ev.data for ev in events if ev.kind == GRAPH_EVENT]
    assert {"updates", "checkpoints", "messages", "tasks", "debug"} <= {c["mode"] for c in raw}
    assert "token" in {ev.kind for ev in events}
    first_node = next(i for i, ev in enumerate(events) if ev.kind == "node")
    chunk = next(ev.data for ev in reversed(events[:first_node]) if ev.kind == GRAPH_EVENT)
    assert chunk["mode"] == "updates" and chunk["ns"] == []
    assert events[first_node].data["node"] in chunk["chunk"]
