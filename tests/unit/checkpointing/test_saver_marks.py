"""A thread's head mark stays the same while nothing is written and changes with every write that
could change what `get_tuple` answers, also one made by another saver (another process)."""

from __future__ import annotations

from pathlib import Path

from langgraph.checkpoint.base import empty_checkpoint

from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.saver_marks import head_mark


def test_the_mark_follows_every_write_of_any_saver(tmp_path: Path) -> None:
    reader, writer = JsonlCheckpointSaver(tmp_path), JsonlCheckpointSaver(tmp_path)
    head = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    assert head_mark(reader, head) is None  # no checkpoint yet

    cp = empty_checkpoint()
    cfg = writer.put(head, cp, {"step": 0}, {})
    first = head_mark(reader, head)
    assert first is not None and first == head_mark(reader, head) == head_mark(reader, cfg)

    writer.put_writes(cfg, [("notes", "a")], "task-1")
    written = head_mark(reader, head)
    assert written != first
    tuple_ = reader.get_tuple(head)
    assert tuple_ is not None and [w[1:] for w in tuple_.pending_writes or []] == [("notes", "a")]

    nxt = empty_checkpoint()
    writer.put(cfg, nxt, {"step": 1}, {})
    assert head_mark(reader, head) not in (first, written)
    assert head_mark(reader, cfg) != first  # the earlier checkpoint's mark moves too: the files grew
    assert head_mark(reader, {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "nope"}}) is None
