"""The checkpoint document's `next_nodes` and `runtime_snapshot` are the real ones.

`next_nodes` is compared, checkpoint by checkpoint, with what LangGraph itself says runs next
(`get_state_history(...).next`) on graphs with branches, a join, a deferred node, `Send`, an
interrupt and a finished run; the runtime snapshot comes from the hook a caller supplies.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt

from checkpointing.saver import JsonlCheckpointSaver


class S(TypedDict):
    log: Annotated[list[str], operator.add]
    skill: str | None


def _node(name: str) -> Any:
    def run(state: S) -> dict[str, Any]:
        return {"log": [name]}

    return run


def _docs_vs_langgraph(saver: JsonlCheckpointSaver, graph: Any, cfg: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(our document's next_nodes, LangGraph's next) for every checkpoint of the thread."""
    pairs = []
    for snap in graph.get_state_history(cfg):
        doc = saver.get_document(snap.config)
        assert doc is not None, snap.config
        pairs.append((doc["next_nodes"], sorted(set(snap.next))))
    return pairs


def test_next_nodes_match_langgraph_on_branches_join_defer_and_send(tmp_path: Path) -> None:
    """Every checkpoint of a run through a fan-out, a join, a deferred node and Send packets."""
    b: Any = StateGraph(S)
    for name in ("a", "b", "c", "join", "late", "worker"):
        b.add_node(name, _node(name), defer=name == "late")
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("a", "c")
    b.add_edge(["b", "c"], "join")  # a join channel: join:b+c:join
    b.add_conditional_edges("join", lambda s: [Send("worker", s), "late"], ["worker", "late"])
    b.add_edge("worker", END)
    b.add_edge("late", END)
    saver = JsonlCheckpointSaver(tmp_path)
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke({"log": [], "skill": None}, cfg)
    pairs = _docs_vs_langgraph(saver, graph, cfg)
    assert len(pairs) >= 6
    assert all(ours == theirs for ours, theirs in pairs), pairs
    assert pairs[0] == ([], [])  # the finished run's last checkpoint: nothing runs next
    assert any("join" in theirs for _, theirs in pairs) and any("worker" in theirs for _, theirs in pairs)


def test_next_nodes_of_an_interrupted_run_name_the_waiting_node(tmp_path: Path) -> None:
    """A node paused by interrupt() is what runs next, in our document as in LangGraph."""

    def ask(state: S) -> dict[str, Any]:
        return {"log": [str(interrupt("ok?"))]}

    b: Any = StateGraph(S)
    b.add_node("first", _node("first"))
    b.add_node("ask", ask)
    b.add_edge(START, "first")
    b.add_edge("first", "ask")
    b.add_edge("ask", END)
    saver = JsonlCheckpointSaver(tmp_path)
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke({"log": [], "skill": None}, cfg)
    doc = saver.get_document(cfg)
    assert doc is not None and doc["next_nodes"] == ["ask"] == list(graph.get_state(cfg).next)
    assert all(ours == theirs for ours, theirs in _docs_vs_langgraph(saver, graph, cfg))


def test_runtime_snapshot_comes_from_the_hook_and_is_stored_once(tmp_path: Path) -> None:
    """The hook sees each checkpoint's state: the document carries the active skill it held."""

    def snap(checkpoint: Any, metadata: Any) -> dict[str, Any]:
        return {"active_skill": checkpoint["channel_values"].get("skill"), "pin": metadata.get("pin"), "pad": "x" * 300}

    def pick(state: S) -> dict[str, Any]:
        return {"skill": "sql", "log": ["pick"]}

    b: Any = StateGraph(S)
    b.add_node("pick", pick)
    b.add_node("work", _node("work"))
    b.add_edge(START, "pick")
    b.add_edge("pick", "work")
    b.add_edge("work", END)
    saver = JsonlCheckpointSaver(tmp_path, runtime_snapshot=snap)
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t", "pin": "p1"}}
    graph.invoke({"log": [], "skill": None}, cfg)
    skills = [saver.get_document(s.config)["runtime_snapshot"]["active_skill"] for s in graph.get_state_history(cfg)]  # type: ignore[index]
    assert skills[0] == "sql" and skills[-1] is None, skills
    doc = saver.get_document(cfg)
    assert doc is not None and doc["runtime_snapshot"]["pin"] == "p1"
    # Reopened by another saver (no hook): the stored snapshot still reads back.
    again = JsonlCheckpointSaver(tmp_path).get_document(cfg)
    assert again is not None and again["runtime_snapshot"] == doc["runtime_snapshot"]
    log = next(tmp_path.rglob("checkpoints.jsonl")).read_bytes()
    assert log.count(b"x" * 300) == 2  # two distinct snapshots (skill None, then sql), each stored once
