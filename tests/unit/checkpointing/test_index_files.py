"""The persisted indexes beside the logs (`*.jsonl.idx`): a new process reads them and only the tail.

Each test compares what a reader sees with the index against what it sees with the index file
removed (the log alone is the truth), and checks from which byte the reader scanned the log: an
index that still describes the log saves the scan of everything it covers; one that does not
(rewritten, replaced, damaged, written by a writer whose view was stale) is never used.
Sessions are in a non-default tenant, with a forked branch in the saver and in the event log.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Annotated, Any, TypedDict

import orjson
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph

from agent.core.events import session_event_log
from checkpointing import _saver_store, indexfile
from checkpointing.entry_log import EventLog
from checkpointing.exceptions import CheckpointingError
from checkpointing.records import encode_record, verify_line
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.store import files as store_files
from graph.state import merge_messages

TENANT = "acme-7"
CFG: Any = {"configurable": {"thread_id": "s1", "tenant_id": TENANT}}
RUN_LOG = Path(f"tenants/{TENANT}/sessions/s1/runs/main/checkpoints.jsonl")
EVENTS = Path(f"tenants/{TENANT}/sessions/s1/events.jsonl")


class State(TypedDict):
    messages: Annotated[list, DeltaChannel(merge_messages, snapshot_frequency=7)]
    n: int


def _graph(saver: JsonlCheckpointSaver, steps: int) -> Any:
    def agent(s: Any) -> dict[str, Any]:
        call = {"id": f"c{s['n']}", "name": "t", "args": {"n": s["n"]}}
        return {"messages": [AIMessage(f"step {s['n']}", tool_calls=[call])], "n": s["n"] + 1}

    def tools(s: Any) -> dict[str, Any]:
        return {"messages": [ToolMessage("r" * 400 + str(s["n"]), tool_call_id=f"c{s['n'] - 1}")]}

    b: Any = StateGraph(State)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["n"] < steps else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=saver)


def _session(base: Path, steps: int = 12) -> None:
    """A thread with a fork: the main line, then a branch from an early checkpoint."""
    saver = JsonlCheckpointSaver(base)
    graph = _graph(saver, steps)
    graph.invoke({"messages": [HumanMessage("go")], "n": 0}, CFG)
    early = list(graph.get_state_history(CFG))[-4].config
    forked = graph.update_state({**early, "configurable": {**early["configurable"], "tenant_id": TENANT}}, {"n": 1})
    graph.invoke(None, forked)
    saver.save_indexes()


def _state(base: Path) -> Any:
    saver = JsonlCheckpointSaver(base)
    graph = _graph(saver, 12)
    history = [(h.values, h.next, h.config["configurable"]["checkpoint_id"]) for h in graph.get_state_history(CFG)]
    assert history
    latest = saver.get_tuple(CFG)
    assert latest is not None
    return history, latest.checkpoint["channel_values"], latest.pending_writes


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, int]]:
    """(file name, first byte) of every scan the saver and the event log make of this test's files
    (the real scan runs). Only this test's: a daemon thread an earlier test left (a layer's outbox
    retrier) may scan its own folder meanwhile."""
    seen: list[tuple[str, int]] = []

    def spy(real: Any) -> Any:
        def scan(path: Path, start: int = 0, first_line: int = 1, limit: int | None = None) -> Any:
            if tmp_path in Path(path).parents:
                seen.append((path.name, start))
            return real(path, start, first_line, limit)

        return scan

    monkeypatch.setattr(store_files, "scan", spy(store_files.scan))  # every files store scan: run files, event logs
    return seen


def _without_index(base: Path, tmp: Path) -> Path:
    bare = tmp / "bare"
    shutil.copytree(base, bare)
    for idx in bare.rglob("*.idx"):
        idx.unlink()
    return bare


def test_a_new_saver_reads_the_index_and_scans_only_the_tail(tmp_path: Path, scans: list[tuple[str, int]]) -> None:
    """Opened again, the saver scans nothing the index covers; its reads equal the log's alone."""
    base = tmp_path / "a"
    _session(base)
    size = (base / RUN_LOG).stat().st_size
    scans.clear()
    got = _state(base)
    assert all(start == size for _, start in scans), scans
    assert len(got[0]) > 20  # the main line and the fork
    assert got == _state(_without_index(base, tmp_path))


def test_records_appended_after_the_index_are_caught_up(tmp_path: Path, scans: list[tuple[str, int]]) -> None:
    """A writer that appended without saving the index (killed): the next open scans from the index's end."""
    base = tmp_path / "a"
    _session(base)
    covered = (base / RUN_LOG).stat().st_size
    saver = JsonlCheckpointSaver(base)
    _graph(saver, 15).invoke({"messages": [HumanMessage("more")]}, CFG)  # appends; no save threshold reached
    assert (base / RUN_LOG).stat().st_size > covered
    scans.clear()
    got = _state(base)
    assert ("checkpoints.jsonl", covered) in scans and ("checkpoints.jsonl", 0) not in scans, scans
    assert got == _state(_without_index(base, tmp_path))


def test_a_log_longer_than_a_scan_window_is_indexed_a_window_at_a_time(
    tmp_path: Path, scans: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no index to start from, the run file is scanned in windows, each from where the last
    one ended: what the saver reads is the same as from one scan of the whole file."""
    base = tmp_path / "a"
    _session(base)
    bare = _without_index(base, tmp_path)
    whole = _state(bare)
    monkeypatch.setattr(_saver_store, "_SCAN_WINDOW", 2000)
    scans.clear()
    assert _state(bare) == whole
    starts = [start for name, start in scans if name == "checkpoints.jsonl"]
    assert len(starts) > 5 and starts[0] == 0 and starts == sorted(set(starts)), starts


def test_a_copied_session_keeps_its_index(tmp_path: Path, scans: list[tuple[str, int]]) -> None:
    """A folder copied elsewhere (a restored backup: other inodes) still opens from its index."""
    base = tmp_path / "a"
    _session(base)
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    scans.clear()
    got = _state(copy)
    assert ("checkpoints.jsonl", 0) not in scans, scans
    assert got == _state(_without_index(base, tmp_path))


def test_an_index_of_another_file_is_never_used(tmp_path: Path, scans: list[tuple[str, int]]) -> None:
    """The run file rewritten (retention) under an index that a stale writer put back: ignored."""
    base = tmp_path / "a"
    _session(base)
    idx = indexfile.path_of(base / RUN_LOG)
    stale = idx.read_bytes()
    saver = JsonlCheckpointSaver(base, keep_last=2)
    saver.prune(["s1"])
    assert not idx.exists() or idx.read_bytes() != stale  # the rewrite dropped the old index
    covered = orjson.loads(verify_line(stale[:-1]))["end"]
    more = JsonlCheckpointSaver(base)
    for i in range(8):  # grow the new file past the end the stale index covered
        _graph(more, 12 + 3 * (i + 1)).invoke({"messages": [HumanMessage(f"more {i}")]}, CFG)
    assert (base / RUN_LOG).stat().st_size > covered
    idx.write_bytes(stale)
    scans.clear()
    assert _state(base) == _state(_without_index(base, tmp_path))
    assert ("checkpoints.jsonl", 0) in scans, scans


@pytest.mark.parametrize("damage", ["truncated", "garbage", "flipped"])
def test_a_damaged_index_is_ignored_and_said(
    tmp_path: Path, scans: list[tuple[str, int]], caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    """A damaged index file changes nothing that is read; a warning names it; the log is scanned."""
    base = tmp_path / "a"
    _session(base)
    idx = indexfile.path_of(base / RUN_LOG)
    data = idx.read_bytes()
    idx.write_bytes(
        {"truncated": data[: len(data) // 2], "garbage": b"not an index\n", "flipped": data[:40] + b"X" + data[41:]}[
            damage
        ]
    )
    scans.clear()
    with caplog.at_level(logging.WARNING):
        got = _state(base)
    assert got == _state(_without_index(base, tmp_path))
    assert ("checkpoints.jsonl", 0) in scans
    assert any("damaged" in r.getMessage() and str(idx) in r.getMessage() for r in caplog.records)


def test_a_flip_in_a_record_the_index_points_at_is_still_an_error(tmp_path: Path) -> None:
    """With the index, every record read is still verified: a flip in an old one raises."""
    base = tmp_path / "a"
    _session(base)
    data = bytearray((base / RUN_LOG).read_bytes())
    data[200] ^= 0x04  # inside the first records (values every checkpoint uses)
    (base / RUN_LOG).write_bytes(bytes(data))
    with pytest.raises(CheckpointingError):
        _state(base)


def _events(base: Path) -> EventLog:
    log = session_event_log(base, TENANT, "s1")
    log.create({"tenant_id": TENANT, "agent_id": "a", "user_id": "bob", "session_id": "s1", "created_at": None,
                "config_digest": None})  # fmt: skip
    parent = None
    for i in range(150):
        parent = log.append("user_turn" if i % 5 == 0 else "node_end", {"i": i, "pad": "p" * 200}, parent_id=parent).id
    fork_at = log.entries()[40].id
    branch = log.append("branch_created", {"from": fork_at}, parent_id=fork_at, branch_id="b2")
    log.append("user_turn", {"i": "on b2"}, parent_id=branch.id, branch_id="b2")
    log.save_index()
    return log


def _event_view(base: Path) -> Any:
    log = session_event_log(base, TENANT, "s1")
    leaf = log.branch_leaf("b2")
    return (
        log.header(),
        log.branches(),
        log.branch_stats(),
        [e.payload for e in log.projection(leaf, frozenset({"user_turn"}))],
        log.raw_entries(),
        [e.id for e in log.last(3)],
    )


def test_a_new_event_log_reads_its_index_and_scans_only_the_tail(tmp_path: Path, scans: list[tuple[str, int]]) -> None:
    """The event log opened again: the tail questions equal the log's alone, nothing rescanned
    but for a whole-history read; the header is always read from the log itself."""
    base = tmp_path / "a"
    _events(base)
    size = (base / EVENTS).stat().st_size
    scans.clear()
    log = session_event_log(base, TENANT, "s1")
    assert log.branch_leaf("b2") is not None and log.header() is not None
    assert [s for s in scans if s[0] == "events.jsonl"] == [], scans  # no scan at all: nothing past the index
    assert _event_view(base) == _event_view(_without_index(base, tmp_path))
    data = bytearray((base / EVENTS).read_bytes())
    data[30] ^= 0x01  # inside the header line
    (base / EVENTS).write_bytes(bytes(data))
    with pytest.raises(CheckpointingError):
        session_event_log(base, TENANT, "s1").header()
    assert size == len(data)


def test_event_log_appends_after_its_index_are_caught_up(tmp_path: Path) -> None:
    """Another process appended without saving the index: the next reader sees every entry."""
    base = tmp_path / "a"
    first = _events(base)
    other = session_event_log(base, TENANT, "s1")
    other.append("user_turn", {"i": "late"}, parent_id=first.branch_leaf("main"))
    view = _event_view(base)
    assert view == _event_view(_without_index(base, tmp_path))
    assert any(e.get("payload", {}).get("i") == "late" for e in view[4])


def test_an_index_is_used_only_while_its_last_record_is_the_one_indexed(tmp_path: Path) -> None:
    """Same length, records at the same places, but another last record: not this log's index."""
    log = tmp_path / "x.jsonl"
    recs = [encode_record({"k": i, "v": "a" * 20}) for i in range(3)]
    log.write_bytes(b"".join(recs))
    last = len(recs[0]) + len(recs[1])
    indexfile.save(log, len(log.read_bytes()), 3, last, indexfile.record_crc(recs[2]), {"any": "state"})
    snap = indexfile.load(log)
    assert snap is not None and snap.state == {"any": "state"} and (snap.end, snap.lines) == (last + len(recs[2]), 3)
    log.write_bytes(recs[0] + recs[1] + encode_record({"k": 2, "v": "b" * 20}) + encode_record({"k": 3}))
    assert indexfile.load(log) is None  # longer, a valid record where the last one was, not the same one
    log.write_bytes(recs[0] + recs[1])
    assert indexfile.load(log) is None  # shorter than what the index covers


def test_an_index_saved_before_a_rewrite_that_kept_the_last_record_in_place_is_not_used(tmp_path: Path) -> None:
    """A retention pass rewrote run B (items first): same length, same last record at the same
    place; the index saved before is refused (its probes of earlier records fail)."""
    import uuid6

    from checkpointing import _saver_retention as retention

    saver = JsonlCheckpointSaver(tmp_path)
    ids = [str(uuid6.uuid6()) for _ in range(12)]

    def put(run: str, i: int, parent: str | None, vals: Any, vers: Any) -> None:
        cfg: Any = {"configurable": {"thread_id": "t", "run_id": run, "checkpoint_ns": "", "checkpoint_id": parent}}
        cp: Any = {"v": 1, "id": ids[i], "ts": "2026", "channel_values": vals, "channel_versions": vers,
                   "versions_seen": {}, "updated_channels": None}  # fmt: skip
        meta = {"source": "input", "step": i, "counters_since_delta_snapshot": {"m": (1, 1)}}
        saver.put(cfg, cp, meta, dict(vers))
        saver.put_writes(
            {"configurable": {**cfg["configurable"], "checkpoint_id": ids[i]}}, [("m", f"w{i}" * 30)], f"t{i}"
        )

    put("A", 0, None, {"m": ["seed" * 40]}, {"m": 1})
    for i in range(1, 6):
        put("A", i, ids[i - 1], {}, {"m": i + 1})
    put("B", 10, ids[4], {}, {"m": 99})
    put("B", 11, ids[10], {}, {"m": 100})
    store = saver._store("default", "t")
    log = store.run_file("B")
    store.save_index("B")
    stale = indexfile.path_of(log).read_bytes()
    assert indexfile.load(log) is not None
    retention.retain(saver.docs, store, "A", 2)
    indexfile.path_of(log).write_bytes(stale)  # as a writer with an old view would have left it
    assert indexfile.load(log) is None
