"""HeadValues answers what LangGraph's get_state shows, and a kept answer never outlives its checkpoint:
on LangGraph's in-memory saver and on the JSONL saver (whose kept answers are found by the thread's
head mark, without loading the checkpoint), also when another saver instance (another process)
writes the thread."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agent.serve.encode import jsonable, thread_state
from agent.serve.head_values import HeadValues
from checkpointing.saver import JsonlCheckpointSaver

SAVERS = ["memory", "jsonl"]


class _State(TypedDict, total=False):
    notes: list[str]


def _graph(saver: Any = None) -> Any:
    def ask(state: _State) -> _State:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"notes": [*state.get("notes", []), first, second]}

    builder = StateGraph(_State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver or InMemorySaver())


@pytest.fixture(params=SAVERS)
def graph(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    return _graph(JsonlCheckpointSaver(tmp_path) if request.param == "jsonl" else InMemorySaver())


def _expected(graph: Any, config: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    snap = graph.get_state(config)
    return jsonable(snap.values or {}), {t.id: [jsonable(i) for i in t.interrupts] for t in snap.tasks if t.interrupts}


def test_read_matches_get_state_through_interrupts_and_resumes(graph: Any) -> None:
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


def test_read_at_a_past_checkpoint_matches_get_state(graph: Any) -> None:
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


def test_kept_answers_are_bounded_by_their_size() -> None:
    """Large states (a long thread's history) are not all kept: their JSON in all stays under the
    bound, the newest is kept whatever its size, and every answer is still what get_state shows."""
    graph = _graph()
    heads = HeadValues(graph, max_bytes=50_000)
    configs = []
    for n in range(8):
        config = {"configurable": {"thread_id": f"big{n}"}}
        graph.invoke({"notes": [f"{n}" * 20_000]}, config)
        configs.append(config)
        assert heads.read(config) == _expected(graph, config)
        assert heads.state(config) == thread_state(f"big{n}", graph.get_state(config))
        assert 20_000 < heads.kept_bytes <= 50_000
    assert len(heads._kept) == 2  # the last two answers (values and state) of the last thread
    huge = {"configurable": {"thread_id": "huge"}}
    graph.invoke({"notes": ["h" * 80_000]}, huge)
    assert heads.read(huge) == _expected(graph, huge) and heads.kept_bytes > 80_000
    assert heads.read(huge) == _expected(graph, huge) and len(heads._kept) == 1
    assert heads.read(configs[0]) == _expected(graph, configs[0])


def test_state_matches_get_state_at_the_head_and_at_past_checkpoints(graph: Any) -> None:
    heads = HeadValues(graph)
    config = {"configurable": {"thread_id": "t3"}}
    assert heads.state(config) is None
    graph.invoke({"notes": ["x"]}, config)
    assert heads.state(config) == thread_state("t3", graph.get_state(config))
    graph.invoke(Command(resume="a"), config)
    assert heads.state(config) == thread_state("t3", graph.get_state(config))
    for snap in graph.get_state_history(config):
        assert heads.state(snap.config) == thread_state("t3", snap)


def test_writes_of_another_process_are_seen(tmp_path: Any) -> None:
    reader, writer = _graph(JsonlCheckpointSaver(tmp_path)), _graph(JsonlCheckpointSaver(tmp_path))
    heads = HeadValues(reader)
    config = {"configurable": {"thread_id": "t4"}}
    writer.invoke({"notes": ["x"]}, config)
    first = heads.read(config)
    assert first == _expected(writer, config) and first[1]
    writer.invoke(Command(resume="a"), config)  # a new interrupt on the same checkpoint
    assert heads.read(config) == _expected(writer, config) != first
    writer.invoke(Command(resume="b"), config)
    assert heads.read(config) == ({"notes": ["x", "a", "b"]}, {})
