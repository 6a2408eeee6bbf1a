"""Group commit: the saver, the event log and the journal of one superstep reach disk at one barrier."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from agent.core.events import session_event_log
from agent.tools.journal import ToolExecutionJournal
from checkpointing import fsyncs, records
from checkpointing.blobs import BlobStore
from checkpointing.commit_group import TIER_EVENTS, CommitGroup, group_for
from checkpointing.entry_log import EventLog
from checkpointing.record_log import RecordLog
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.store.file_store import FileStore


def test_one_barrier_fsyncs_each_touched_file_once(tmp_path: Path) -> None:
    """Inside `deferred()`, appends to three logs cost no fsync until the block ends, then one per file."""
    group = CommitGroup()
    saver = JsonlCheckpointSaver(tmp_path, group=group)
    events = session_event_log(tmp_path, "acme", "s1", group=group)
    events.create({"tenant_id": "acme", "agent_id": "a", "user_id": "u", "session_id": "s1",
                   "created_at": "2026-01-01T00:00:00+00:00", "config_digest": None})  # fmt: skip
    journal = ToolExecutionJournal.over(FileStore(tmp_path, group).session("acme", "s1", "always"), BlobStore(tmp_path))
    cfg = {"configurable": {"thread_id": "s1", "tenant_id": "acme", "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [HumanMessage("hi", id="h")]}
    cp["channel_versions"] = {"messages": "1"}
    saved = saver.put(cfg, cp, {}, {"messages": "1"})
    journal.record_completed("r0", "c0", "earlier")  # every file exists now (a new one also costs its folder)
    before = fsyncs.fsync_count()
    with group.deferred():
        saver.put_writes(saved, [("messages", [HumanMessage("more", id="m")])], "task")
        events.append("user_turn", {"content": "hello"})
        journal.record_completed("r1", "c1", "done")
        for _ in range(3):
            events.append("assistant_message", {"content": "x"})
        assert fsyncs.fsync_count() == before
    assert fsyncs.fsync_count() - before == 3
    got = JsonlCheckpointSaver(tmp_path).get_tuple(saved)
    assert got is not None and got.pending_writes[0][2] == [HumanMessage("more", id="m")]


def test_outside_a_block_always_means_every_append(tmp_path: Path) -> None:
    """Without an open block, fsync="always" logs fsync each append as before."""
    group = CommitGroup()
    log = RecordLog(tmp_path / "a.jsonl", group=group)
    log.append({"n": 0})
    before = fsyncs.fsync_count()
    log.append({"n": 1})
    log.append({"n": 2})
    assert fsyncs.fsync_count() - before == 2


def _session_logs(tmp_path: Path) -> tuple[JsonlCheckpointSaver, EventLog, ToolExecutionJournal, CommitGroup, dict]:
    """The saver, event log and journal of one session, joined to its process-wide group."""
    from checkpointing.layout import session_dir

    group = group_for(session_dir(tmp_path, "acme", "s2"))
    saver = JsonlCheckpointSaver(tmp_path)
    events = session_event_log(tmp_path, "acme", "s2", fsync="batch", group=group, tier=TIER_EVENTS)
    events.create({"tenant_id": "acme", "agent_id": "a", "user_id": "u", "session_id": "s2",
                   "created_at": "2026-01-01T00:00:00+00:00", "config_digest": None})  # fmt: skip
    events.sync()
    streams = FileStore(tmp_path).session("acme", "s2", "batch")
    journal = ToolExecutionJournal.over(streams, BlobStore(tmp_path), fsync="batch")
    cfg = {"configurable": {"thread_id": "s2", "tenant_id": "acme", "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [HumanMessage("hi", id="h")]}
    cp["channel_versions"] = {"messages": "1"}
    saved = saver.put(cfg, cp, {}, {"messages": "1"})
    journal.record_completed("r0", "c0", "earlier")
    journal._log.sync()  # every file exists and is durable: the counts below are the step's alone
    return saver, events, journal, group, saved


def test_step_barrier_syncs_checkpoints_and_events_not_the_lazy_journal(tmp_path: Path) -> None:
    """A held session group: a tool step's appends cost no fsync; its step barrier costs two (the
    checkpoint log, then the event log); the journal's lazy records wait for the release."""
    saver, events, journal, group, saved = _session_logs(tmp_path)
    before = fsyncs.fsync_count()
    group.hold()
    saver.put_writes(saved, [("messages", [HumanMessage("more", id="m")])], "task")
    journal.record_intent("r1", "c1", "peek", {}, "read_only")
    journal.record_completed("r1", "c1", "done")
    events.append("tool_result", {"content": "x"})
    assert fsyncs.fsync_count() == before
    assert group.barrier(TIER_EVENTS) == 2
    assert fsyncs.fsync_count() - before == 2
    assert group.dirty() == [journal.path]
    group.release()
    assert fsyncs.fsync_count() - before == 3
    assert group.dirty() == []


def test_unsafe_intent_in_a_held_group_makes_the_step_durable_first(tmp_path: Path) -> None:
    """Before an unsafe tool runs, the checkpoint data that asked for it and its INTENT are on disk
    (two fsyncs, checkpoint log first); the event log may still lag until the step barrier."""
    saver, events, journal, group, saved = _session_logs(tmp_path)
    before = fsyncs.fsync_count()
    synced: list[str] = []
    real = fsyncs._datasync_path

    def spy(path: Path, kept: fsyncs.KeptFd | None = None) -> None:
        synced.append(path.name)
        real(path, kept)

    fsyncs._datasync_path = spy  # type: ignore[assignment]
    try:
        with group.deferred():
            saver.put_writes(saved, [("messages", [HumanMessage("call", id="m2")])], "task")
            events.append("tool_call", {"name": "bump"})
            journal.record_intent("r1", "c9", "bump", {}, "unsafe")
            assert synced == ["checkpoints.jsonl", "journal.jsonl"]
            assert group.dirty() == [events.path]
    finally:
        fsyncs._datasync_path = real  # type: ignore[assignment]
    assert synced == ["checkpoints.jsonl", "journal.jsonl", "events.jsonl"]
    assert fsyncs.fsync_count() - before == 3


def test_concurrent_appenders_of_one_file_share_fsyncs(tmp_path: Path) -> None:
    """fsync="always" appends from several threads are each durable on return, with fewer fsyncs
    than appends when they overlap, never more."""
    import threading

    log = RecordLog(tmp_path / "c.jsonl")
    log.append({"n": -1})
    before = fsyncs.fsync_count()

    def work(k: int) -> None:
        for i in range(20):
            log.append({"k": k, "i": i})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(records.read_records(tmp_path / "c.jsonl")) == 81
    assert 1 <= fsyncs.fsync_count() - before <= 80
