"""Group commit: the saver, the event log and the journal of one superstep reach disk at one barrier."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from agent.tools.journal import ToolExecutionJournal
from checkpointing import records
from checkpointing.events import EventLog
from checkpointing.records import CommitGroup
from checkpointing.saver import JsonlCheckpointSaver


def test_one_barrier_fsyncs_each_touched_file_once(tmp_path: Path) -> None:
    """Inside `deferred()`, appends to three logs cost no fsync until the block ends, then one per file."""
    group = CommitGroup()
    saver = JsonlCheckpointSaver(tmp_path, group=group)
    events = EventLog(tmp_path, "acme", "s1", group=group)
    events.create({"tenant_id": "acme", "agent_id": "a", "user_id": "u", "session_id": "s1",
                   "created_at": "2026-01-01T00:00:00+00:00", "config_digest": None})  # fmt: skip
    journal = ToolExecutionJournal(tmp_path, "acme", "s1", group=group)
    cfg = {"configurable": {"thread_id": "s1", "tenant_id": "acme", "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [HumanMessage("hi", id="h")]}
    cp["channel_versions"] = {"messages": "1"}
    saved = saver.put(cfg, cp, {}, {"messages": "1"})
    journal.record_completed("r0", "c0", "earlier")  # every file exists now (a new one also costs its folder)
    before = records.fsync_count()
    with group.deferred():
        saver.put_writes(saved, [("messages", [HumanMessage("more", id="m")])], "task")
        events.append("user_turn", {"content": "hello"})
        journal.record_completed("r1", "c1", "done")
        for _ in range(3):
            events.append("assistant_message", {"content": "x"})
        assert records.fsync_count() == before
    assert records.fsync_count() - before == 3
    got = JsonlCheckpointSaver(tmp_path).get_tuple(saved)
    assert got is not None and got.pending_writes[0][2] == [HumanMessage("more", id="m")]


def test_outside_a_block_always_means_every_append(tmp_path: Path) -> None:
    """Without an open block, fsync="always" logs fsync each append as before."""
    group = CommitGroup()
    log = records.RecordLog(tmp_path / "a.jsonl", group=group)
    log.append({"n": 0})
    before = records.fsync_count()
    log.append({"n": 1})
    log.append({"n": 2})
    assert records.fsync_count() - before == 2
