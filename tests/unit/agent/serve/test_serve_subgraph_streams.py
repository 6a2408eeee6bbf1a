"""Events of a subgraph as the server names them: `mode|namespace` with `stream_subgraphs`, nothing
of their own without; a real LangGraph graph with a subgraph, streamed as the server's runner streams."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from agent.core.results import RunEvent
from agent.runner import GRAPH_EVENT
from agent.serve.streams import StreamTranslator

MODES = frozenset({"updates", "values", "tasks", "debug", "events"})


class State(TypedDict):
    n: int


def _graph() -> Any:
    child = StateGraph(State)
    child.add_node("inner", lambda s: {"n": s["n"] + 1})
    child.add_edge(START, "inner")
    child.add_edge("inner", END)
    parent = StateGraph(State)
    parent.add_node("outer", child.compile())
    parent.add_edge(START, "outer")
    parent.add_edge("outer", END)
    return parent.compile(checkpointer=InMemorySaver())


def _names(subgraphs: bool) -> list[str]:
    translator = StreamTranslator(MODES, "r-1", subgraphs=subgraphs)
    modes = ["updates", "checkpoints", "tasks", "debug"]
    out: list[str] = []
    config = {"configurable": {"thread_id": f"t-{subgraphs}"}}
    for ns, mode, chunk in _graph().stream({"n": 1}, config, stream_mode=modes, subgraphs=True):
        ev = RunEvent(GRAPH_EVENT, {"mode": mode, "chunk": chunk, "ns": list(ns)})
        out.extend(name for name, _ in translator.translate(ev))
    return out


def test_subgraph_events_are_named_by_namespace_only_when_asked() -> None:
    nested = _names(True)
    inner = {n for n in nested if "|" in n}
    assert {n.split("|")[0] for n in inner} == {"updates", "values", "tasks", "debug"}
    assert all(n.split("|")[1].startswith("outer:") for n in inner)
    flat = _names(False)
    assert not any("|" in n for n in flat)
    assert {"updates", "values", "tasks", "debug", "events"} <= set(flat)
    assert [n for n in nested if "|" not in n] == flat
