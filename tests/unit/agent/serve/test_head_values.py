"""HeadValues answers what LangGraph's get_state shows, and a kept answer never outlives its checkpoint."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agent.serve.encode import jsonable
from agent.serve.head_values import HeadValues


class _State(TypedDict, total=False):
    notes: list[str]


def _graph() -> Any:
    def ask(state: _State) -> _State:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"notes": [*state.get("notes", []), first, second]}

    builder = StateGraph(_State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=InMemorySaver())


def _expected(graph: Any, config: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    snap = graph.get_state(config)
    return jsonable(snap.values or {}), {t.id: [jsonable(i) for i in t.interrupts] for t in snap.tasks if t.interrupts}


def test_read_matches_get_state_through_interrupts_and_resumes() -> None:
    graph = _graph()
    heads = HeadValues(graph)
    config = {"configurable": {"thread_id": "t1"}}
    assert heads.read(config) == ({}, {})
    seen = []
    for step in ({"notes": ["start"]}, Command(resume="a"), Command(resume="b")):
        graph.invoke(step, config)
        expected = _expected(graph, config)
        assert heads.read(config) == expected
        assert heads.read(config) == expected  # the kept answer
        seen.append(expected)
    assert seen[0][1] != seen[1][1]  # the second interrupt replaced the first on the same checkpoint
    assert seen[2] == ({"notes": ["start", "a", "b"]}, {})


def test_read_at_a_past_checkpoint_matches_get_state() -> None:
    graph = _graph()
    heads = HeadValues(graph)
    config = {"configurable": {"thread_id": "t2"}}
    graph.invoke({"notes": ["x"]}, config)
    graph.invoke(Command(resume="a"), config)
    for snap in graph.get_state_history(config):
        assert heads.read(snap.config) == _expected(graph, snap.config)


def test_kept_answers_are_bounded() -> None:
    graph = _graph()
    heads = HeadValues(graph, size=2)
    for n in range(4):
        config = {"configurable": {"thread_id": f"b{n}"}}
        graph.invoke({"notes": [str(n)]}, config)
        assert heads.read(config) == _expected(graph, config)
    assert len(heads._kept) == 2
