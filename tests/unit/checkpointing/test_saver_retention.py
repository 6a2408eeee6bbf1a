"""keep_last on a real 500-step run: bounded on disk, kept checkpoints identical, forks and interrupts kept."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from checkpointing.saver import JsonlCheckpointSaver

SNAPSHOT_EVERY = 10
KEEP = 5


def add_batches(state: list, writes: Any) -> list:
    out = list(state or [])
    for w in writes:
        out = add_messages(out, w)
    return out


class State(TypedDict):
    messages: Annotated[list, DeltaChannel(add_batches, snapshot_frequency=SNAPSHOT_EVERY)]
    n: int


def build(saver: BaseCheckpointSaver, steps: int, ask_at_end: bool = False) -> Any:
    """agent -> tools -> agent ... (`steps` supersteps in all); optionally a human approval last."""

    def agent(s: Any) -> dict[str, Any]:
        n = s["n"]
        call = {"id": f"c{n}", "name": "lookup", "args": {"n": n}}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"a{n}")], "n": n + 1}

    def tools(s: Any) -> dict[str, Any]:
        n = s["n"] - 1
        return {"messages": [ToolMessage(f"result {n} " + "x" * 500, tool_call_id=f"c{n}", id=f"t{n}")]}

    def approve(s: Any) -> dict[str, Any]:
        answer = interrupt({"approve": s["n"]})
        return {"messages": [HumanMessage(f"approved: {answer}", id="approval")]}

    b: Any = StateGraph(State)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_node("approve", approve)
    b.add_edge(START, "agent")
    done = "approve" if ask_at_end else END
    b.add_conditional_edges("agent", lambda s: "tools" if s["n"] < steps // 2 else done, ["tools", done])
    b.add_edge("tools", "agent")
    b.add_edge("approve", END)
    return b.compile(checkpointer=saver)


def _cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "tenant_id": "acme"}, "recursion_limit": 2000}


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.jsonl"))


def _same(a: Any, b: Any) -> None:
    assert a is not None and b is not None
    assert a.checkpoint == b.checkpoint
    assert a.metadata == b.metadata
    assert a.pending_writes == b.pending_writes
    assert a.parent_config == b.parent_config


def test_keep_last_bounds_a_500_step_run_and_kept_checkpoints_read_back_identical(tmp_path: Path) -> None:
    """500 supersteps with keep_last=5: at most the 5 newest plus their DeltaChannel bases remain,
    each reads back exactly as without retention, and the run resumes with its whole history."""
    ref_saver = JsonlCheckpointSaver(tmp_path / "ref", fsync="batch")
    kept_saver = JsonlCheckpointSaver(tmp_path / "kept", fsync="batch", keep_last=KEEP)
    start = {"messages": [HumanMessage("go", id="h0")], "n": 0}
    out = build(ref_saver, 500).invoke(start, _cfg("run"))
    build(kept_saver, 500).invoke(start, _cfg("run"))

    fresh = JsonlCheckpointSaver(tmp_path / "kept")
    kept = list(fresh.list(_cfg("run")))
    assert len(list(ref_saver.list(_cfg("run")))) > 500
    assert len(kept) == KEEP, len(kept)  # the delta bases are kept inside them, not as ancestors
    # Retention applied to the reference run afterwards: what it keeps reads back as before.
    before = {t.checkpoint["id"]: t for t in JsonlCheckpointSaver(tmp_path / "ref").list(_cfg("run"))}
    JsonlCheckpointSaver(tmp_path / "ref", keep_last=KEEP).retain(_cfg("run"))
    after = list(JsonlCheckpointSaver(tmp_path / "ref").list(_cfg("run")))
    assert len(after) == KEEP
    for tup in after:
        _same(tup, before[tup.checkpoint["id"]])
    ref_state = build(JsonlCheckpointSaver(tmp_path / "ref"), 500).get_state(_cfg("run"))
    assert ref_state.values["messages"] == out["messages"]
    state = build(fresh, 500).get_state(_cfg("run"))
    assert state.values["messages"] == out["messages"] and len(out["messages"]) == 500
    # On disk: about one copy of the latest state plus the kept records, not 500 checkpoints.
    assert _size(tmp_path / "kept") <= 2 * _size(tmp_path / "ref")
    latest_state = sum(len(m.content) for m in out["messages"])
    assert _size(tmp_path / "kept") < 2 * latest_state + 200_000


def test_keep_last_keeps_a_fork_and_a_pending_interrupt(tmp_path: Path) -> None:
    """A branch forked off the main line, and a run waiting on a human, survive many retention passes."""
    saver = JsonlCheckpointSaver(tmp_path, fsync="batch", keep_last=KEEP)
    graph = build(saver, 60)
    graph.invoke({"messages": [HumanMessage("go", id="h0")], "n": 0}, _cfg("t"))
    history = list(graph.get_state_history(_cfg("t")))
    head, base = history[0], history[3]
    fork_cfg = graph.update_state(base.config, {"messages": [HumanMessage("fork", id="fork")]})
    fork_values = graph.get_state(fork_cfg).values
    # The main line goes on from its own head for 60 more supersteps: retention runs many times.
    graph.invoke({"messages": [HumanMessage("more", id="h2")], "n": 0}, head.config)
    waiting = build(saver, 60, ask_at_end=True)
    waiting.invoke({"messages": [HumanMessage("again", id="h1")], "n": 0}, _cfg("t2"))

    fresh = JsonlCheckpointSaver(tmp_path)
    assert len(list(fresh.list(_cfg("t")))) < 60
    assert build(fresh, 60).get_state(fork_cfg).values == fork_values
    pending = build(fresh, 60, ask_at_end=True).get_state(_cfg("t2"))
    assert pending.next == ("approve",) and pending.tasks[0].interrupts
    done = build(fresh, 60, ask_at_end=True).invoke(Command(resume="yes"), _cfg("t2"))
    assert done["messages"][-1].content == "approved: yes" and len(done["messages"]) == 61


def _calls(n: int) -> list[dict[str, Any]]:
    calls = [
        {"tool_calls": [{"name": "calculator", "args": {"expression": f"{i} + 1"}}], "usage": {"input_tokens": 90}}
        for i in range(n)
    ]
    return [*calls, {"content": "Done.", "usage": {"input_tokens": 90, "output_tokens": 2}}]


def test_keep_last_on_a_real_agentrt_run_keeps_the_newest_identical(tmp_path: Path) -> None:
    """agentrt's own graph (its DeltaChannels snapshot every 500 updates): a 260-tool-step turn,
    retention at keep_last=5 keeps 5 checkpoints (plus the branch head), each reading back with
    exactly the state it had before, byte for byte, and the next turn continues the whole context."""
    from agent.runner import AgentRunner
    from checkpointing.codec import CheckpointStateCodec
    from checkpointing.records import canonical_json
    from tests.support.runners import make_config

    loop = {"planning": "never", "max_iterations": 300}
    cfg = make_config(tmp_path, _calls(260), persistence={"keep_last": None}, loop=loop, datasets=[])
    runner = AgentRunner.from_config(cfg)
    first = runner.run("count", new_session_id="s-keep", tenant_id="acme")
    assert first.status == "COMPLETED" and first.tool_calls == 260
    thread: RunnableConfig = {"configurable": {"thread_id": "s-keep", "tenant_id": "acme"}}
    codec = CheckpointStateCodec()

    def states(r: AgentRunner, limit: int | None = None) -> dict[str, bytes]:
        return {
            s.config["configurable"]["checkpoint_id"]: canonical_json(codec.encode(dict(s.values)))
            for s in r.graph.get_state_history(thread, limit=limit)
        }

    # Every checkpoint id, and the full state of the newest ones (each state rebuilds its history
    # since the last DeltaChannel snapshot: all 500 of them would take most of a minute).
    every = [t.config["configurable"]["checkpoint_id"] for t in runner.graph.checkpointer.list(thread)]
    assert len(every) > 500
    newest = sorted(every)[-KEEP:]
    before = states(runner, limit=2 * KEEP)
    assert set(newest) <= set(before)
    saver = JsonlCheckpointSaver(tmp_path / "agentrt", keep_last=KEEP)
    saver.retain({"configurable": {**thread["configurable"], "run_id": first.run_id}})
    again = [*_calls(260), {"content": "Done again.", "usage": {"input_tokens": 90, "output_tokens": 2}}]
    after_runner = AgentRunner.from_config(make_config(tmp_path, again, loop=loop, datasets=[]))
    after = states(after_runner)
    assert len(after) == KEEP, len(after)
    assert sorted(after) == newest
    assert all(after[cp] == before[cp] for cp in after)  # the very bytes of each kept state
    runs = list((tmp_path / "agentrt").rglob("checkpoints.jsonl"))
    assert sum(p.read_bytes().count(b'"k":"c"') for p in runs) == KEEP
    nxt = after_runner.run("and again", session_id="s-keep", tenant_id="acme")
    assert nxt.status == "COMPLETED"
    msgs = after_runner.state("s-keep", "acme")["messages"]
    assert sum(1 for m in msgs if m.type == "tool") == 260 and msgs[-1].content == "Done again."
    assert any(m.content == "Done." for m in msgs)  # the first turn's answer is still in the context


def test_a_record_holding_histories_is_refused_by_a_reader_of_schema_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retention-cut checkpoint says schema 5; the others stay 4 (an older saver reads those)."""
    import orjson

    from checkpointing import _saver_format
    from checkpointing.exceptions import UnknownSchemaError

    saver = JsonlCheckpointSaver(tmp_path, fsync="batch", keep_last=KEEP)
    build(saver, 40).invoke({"messages": [HumanMessage("go", id="h0")], "n": 0}, _cfg("t"))
    log = next(tmp_path.rglob("checkpoints.jsonl"))
    cps = [orjson.loads(line) for line in log.read_bytes().splitlines() if b'"k":"c"' in line]
    assert {c["schema_version"] for c in cps if c.get("histories")} == {5}
    assert {c["schema_version"] for c in cps if not c.get("histories")} == {4}
    monkeypatch.setattr(_saver_format, "READABLE_SCHEMA_VERSIONS", frozenset({2, 3, 4}))  # a saver from before 5
    with pytest.raises(UnknownSchemaError):
        list(JsonlCheckpointSaver(tmp_path).list(_cfg("t")))


def _hand_put(saver: JsonlCheckpointSaver, ids: list[str], run: str, i: int, parent: str | None, vals: Any,
              vers: Any, new: Any) -> None:  # fmt: skip
    cfg: Any = {"configurable": {"thread_id": "t", "run_id": run, "checkpoint_ns": "", "checkpoint_id": parent}}
    cp: Any = {"v": 1, "id": ids[i], "ts": "2026-01-01", "channel_values": vals, "channel_versions": vers,
               "versions_seen": {}, "updated_channels": None}  # fmt: skip
    saver.put(cfg, cp, {"source": "input", "step": i}, new)


def _values(saver: JsonlCheckpointSaver, cp_id: str) -> Any:
    tup = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cp_id}})
    assert tup is not None
    return tup.checkpoint["channel_values"]


def test_a_fork_in_another_run_keeps_its_values_through_two_passes_on_its_origin(tmp_path: Path) -> None:
    """Run B forks from run A's P; passes over A drop P, then the checkpoint that took P's value:
    B's checkpoint reads back the same all along (a run never references another run's values)."""
    import uuid6

    from checkpointing import _saver_retention as retention

    saver = JsonlCheckpointSaver(tmp_path)
    ids = [str(uuid6.uuid6()) for _ in range(8)]
    _hand_put(saver, ids, "A", 0, None, {"x": "a" * 10}, {"x": 1}, {"x": 1})
    _hand_put(saver, ids, "A", 1, ids[0], {"x": "b" * 10}, {"x": 2}, {"x": 2})  # P stores x
    _hand_put(saver, ids, "A", 2, ids[1], {"x": "b" * 10, "y": 1}, {"x": 2, "y": 1}, {"y": 1})
    _hand_put(saver, ids, "B", 3, ids[1], {"x": "b" * 10, "z": 1}, {"x": 2, "z": 1}, {"z": 1})  # the fork
    _hand_put(saver, ids, "A", 4, ids[2], {"x": "b" * 10, "y": 2}, {"x": 2, "y": 2}, {"y": 2})
    before = _values(saver, ids[3])
    retention.retain(saver.docs, saver._store("default", "t"), "A", 2)
    assert _values(saver, ids[3]) == before
    _hand_put(saver, ids, "A", 5, ids[4], {"x": "b" * 10, "y": 3}, {"x": 2, "y": 3}, {"y": 3})
    _hand_put(saver, ids, "A", 6, ids[5], {"x": "b" * 10, "y": 4}, {"x": 2, "y": 4}, {"y": 4})
    retention.retain(saver.docs, saver._store("default", "t"), "A", 2)
    assert _values(saver, ids[3]) == before == {"x": "b" * 10, "z": 1}
    assert _values(JsonlCheckpointSaver(tmp_path), ids[3]) == before


def test_prune_reads_every_item_it_keeps_before_it_replaces_a_file(tmp_path: Path) -> None:
    """A run whose values are items stored in another run, pruned by a fresh saver: nothing lost."""
    import uuid6

    saver = JsonlCheckpointSaver(tmp_path)
    ids = [str(uuid6.uuid6()) for _ in range(4)]
    big = [f"m{i}" * 40 for i in range(3)]
    _hand_put(saver, ids, "A", 0, None, {"x": big}, {"x": 1}, {"x": 1})
    _hand_put(saver, ids, "A", 1, ids[0], {"x": big, "y": 1}, {"x": 1, "y": 1}, {"y": 1})
    _hand_put(saver, ids, "B", 2, ids[1], {"x": [*big, "n" * 80], "y": 2}, {"x": 2, "y": 2}, {"x": 2, "y": 2})
    fresh = JsonlCheckpointSaver(tmp_path)
    fresh.prune(["t"])
    assert _values(fresh, ids[2]) == {"x": [*big, "n" * 80], "y": 2}
    assert len(list(JsonlCheckpointSaver(tmp_path).list({"configurable": {"thread_id": "t"}}))) == 1


def test_a_damaged_item_stops_retention_and_leaves_the_run_file_as_it_was(tmp_path: Path) -> None:
    """A retention pass that meets an item record damaged since the saver opened the session (its
    items are copied as they are read) raises naming the file, and the run file stays byte for
    byte what it was, nothing left beside it."""
    from checkpointing.exceptions import CorruptCheckpointError

    start = {"messages": [HumanMessage("go", id="h0")], "n": 0}
    build(JsonlCheckpointSaver(tmp_path, fsync="batch"), 300).invoke(start, _cfg("t"))
    saver = JsonlCheckpointSaver(tmp_path, keep_last=KEEP)
    assert len(list(saver.list(_cfg("t")))) > KEEP
    log = next(tmp_path.rglob("checkpoints.jsonl"))
    lines = log.read_bytes().splitlines(keepends=True)
    items = [i for i, line in enumerate(lines) if b'"k":"i"' in line[:40]]
    hit = items[-1]  # copied after others were written to the new file
    at = len(lines[hit]) - 10
    lines[hit] = lines[hit][:at] + b"#" + lines[hit][at + 1 :]
    damaged = b"".join(lines)
    log.write_bytes(damaged)
    with pytest.raises(CorruptCheckpointError, match=r"checkpoints\.jsonl"):
        saver.retain(_cfg("t"))
    assert log.read_bytes() == damaged
    assert sorted(p.name for p in log.parent.iterdir() if not p.name.endswith(".idx")) == [log.name]
