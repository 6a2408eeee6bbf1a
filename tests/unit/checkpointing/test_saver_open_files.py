"""A saver keeps each run file open between appends: what another saver does to the files in the
meantime (retention rewrite, delete, a copy over) never makes a later write go to a dead file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpointing.saver import JsonlCheckpointSaver


def _cfg(thread: str, cp: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cp:
        conf["checkpoint_id"] = cp
    return {"configurable": conf}


def _put(saver: JsonlCheckpointSaver, thread: str, parent: str | None, value: Any, version: int) -> str:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": version}
    return saver.put(_cfg(thread, parent), cp, {"step": version}, {"v": version})["configurable"]["checkpoint_id"]


def _chain(saver: JsonlCheckpointSaver, thread: str, n: int, start: str | None = None, first: int = 1) -> list[str]:
    ids: list[str] = [start] if start else []
    for i in range(first, first + n):
        ids.append(_put(saver, thread, ids[-1] if ids else None, f"value-{i}", i))
    return ids[1:] if start else ids


def _values(base: Path, thread: str) -> list[str]:
    fresh = JsonlCheckpointSaver(base)
    return [t.checkpoint["channel_values"]["v"] for t in fresh.list(_cfg(thread))]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_writes_after_another_saver_pruned_the_thread_land_in_the_new_file(tmp_path: Path) -> None:
    """Saver B's prune rewrites the run file; saver A's next checkpoints and writes are read back
    by a fresh saver (none went to the replaced file)."""
    a, b = JsonlCheckpointSaver(tmp_path), JsonlCheckpointSaver(tmp_path)
    ids = _chain(a, "t1", 3)
    b.prune(["t1"])
    assert _values(tmp_path, "t1") == ["value-3"]
    more = _chain(a, "t1", 2, start=ids[-1], first=4)
    a.put_writes(_cfg("t1", more[-1]), [("v", "pending")], "task-1")
    assert _values(tmp_path, "t1") == ["value-5", "value-4", "value-3"]
    latest = JsonlCheckpointSaver(tmp_path).get_tuple(_cfg("t1"))
    assert latest is not None and latest.pending_writes == [("task-1", "v", "pending")]


def test_writes_after_another_saver_deleted_the_thread_start_it_again(tmp_path: Path) -> None:
    """Saver B deletes the thread; saver A's next checkpoint starts a new, readable thread."""
    a, b = JsonlCheckpointSaver(tmp_path), JsonlCheckpointSaver(tmp_path)
    _chain(a, "t1", 2)
    b.delete_thread("t1")
    assert _values(tmp_path, "t1") == []
    _chain(a, "t1", 1, first=7)
    assert _values(tmp_path, "t1") == ["value-7"]


def test_own_retention_and_copy_keep_every_checkpoint_readable(tmp_path: Path) -> None:
    """keep_last rewrites the file under the writing saver many times; every kept checkpoint and a
    copied thread read back, and later appends are not lost."""
    saver = JsonlCheckpointSaver(tmp_path, keep_last=2)
    _chain(saver, "t1", 20)
    assert _values(tmp_path, "t1")[:2] == ["value-20", "value-19"]
    saver.copy_thread("t1", "t2")
    tip = saver.get_tuple(_cfg("t2"))
    assert tip is not None
    _chain(saver, "t2", 1, start=tip.config["configurable"]["checkpoint_id"], first=21)
    assert _values(tmp_path, "t2")[0] == "value-21"


def test_many_sessions_do_not_hold_a_descriptor_each(tmp_path: Path) -> None:
    """Sessions beyond the saver's open-session bound give their descriptors back, and a dropped
    saver closes its own."""
    before = _open_fds()
    saver = JsonlCheckpointSaver(tmp_path)
    for i in range(300):
        _chain(saver, f"s{i}", 1)
    assert _open_fds() - before <= 140  # at most one per open session (128), plus slack
    del saver
    assert _open_fds() - before <= 5


def test_writes_after_another_saver_recreated_a_bigger_thread_land_in_it(tmp_path: Path) -> None:
    """Saver B deletes the thread and writes a longer one in its place (a new file, bigger than the
    one saver A has open); A's next checkpoint is in that file, next to B's."""
    a, b = JsonlCheckpointSaver(tmp_path), JsonlCheckpointSaver(tmp_path)
    _chain(a, "t1", 1)
    b.delete_thread("t1")
    _chain(b, "t1", 5, first=10)
    _chain(a, "t1", 1, first=20)
    assert sorted(_values(tmp_path, "t1")) == sorted(["value-20", *(f"value-{i}" for i in range(10, 15))])
