"""An append-only JSONL file of framed records (`RecordLog`): one `O_APPEND` write per batch,
durable per its fsync policy or at its commit group's barriers.

The files store (`checkpointing.store.files`) keeps one per stream of a session folder.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from checkpointing.commit_group import TIER_STATE, CommitGroup
from checkpointing.fsyncs import KeptFd, file_sync, fsync_dir
from checkpointing.records import FsyncPolicy, encode_record, read_records
from checkpointing.torn_tail import cut_torn_tail

# Fault injection (crash drills): when set, called with (fd, bytes) just before each append's write,
# so a drill can write part of the record and kill the process. Off (None) in normal operation.
write_hook: Callable[[int, bytes], None] | None = None

Durable = Callable[[], None]
"""Waits until an append is durable (returned by an append that asked for it now)."""


def _open_append(path: Path) -> int:
    """An fd appending to `path`, or -1 when the file does not exist yet."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        return -1


class RecordLog:
    """An append-only JSONL file of framed records.

    Appends use `O_APPEND` and one `write` call per batch, so concurrent appenders on one host
    never interleave bytes. Before its first append the log cuts a torn tail left by a crash
    (moved aside to `.broken`), or the next record would fuse with it. With `fsync="always"`
    the fsync runs after the write, outside the log's lock, and concurrent appenders of the
    same file share one (`_FileSync`).
    """

    def __init__(
        self,
        path: Path,
        fsync: FsyncPolicy = "always",
        group: CommitGroup | None = None,
        tier: int = TIER_STATE,
        keep_open: bool = False,
    ) -> None:
        self.path = path
        self.fsync = fsync
        self.group = group
        self.tier = tier
        self._lock = threading.Lock()
        self._checked = False
        self._sync = file_sync(path)
        # keep_open: the owner must call `close()` when the file may be replaced or removed
        # (`inode()` tells which file the descriptor writes to).
        self._kept = KeptFd() if keep_open else None

    def _ensure_clean_tail(self) -> None:
        if not self._checked:
            if self.path.exists():
                cut_torn_tail(self.path)
            self._checked = True

    def append(self, record: dict[str, Any]) -> int:
        """Append one record; returns the byte offset it was written at."""
        return self.append_frames([encode_record(record)])[0]

    def append_many(self, records: list[dict[str, Any]]) -> list[int]:
        """Append several records in one write; returns their byte offsets."""
        return self.append_frames([encode_record(r) for r in records])

    def append_frames(self, frames: list[bytes]) -> list[int]:
        """Append already framed lines in one write (durable per the policy); returns their offsets."""
        offsets, durable = self.write_frames(frames)
        if durable is not None:
            durable()
        return offsets

    def write_frames(self, frames: list[bytes], fsync: FsyncPolicy | None = None) -> tuple[list[int], Durable | None]:
        """Write framed lines in one write; returns their offsets and, when the policy (or `fsync`)
        asks for durability now, the callable that waits for it (call it outside your locks)."""
        policy = fsync or self.fsync
        kept = self._kept
        with self._lock:
            self._ensure_clean_tail()
            fd, new = (kept.fd, False) if kept is not None and kept.fd >= 0 else (_open_append(self.path), False)
            if fd < 0:
                new = True
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if kept is not None and kept.fd != fd:
                kept.set(fd, os.fstat(fd).st_ino)
            try:
                start = os.lseek(fd, 0, os.SEEK_END)
                blob = b"".join(frames)
                if write_hook is not None:
                    write_hook(fd, blob)
                os.write(fd, blob)
            finally:
                if kept is None:
                    os.close(fd)
            seq = self._sync.wrote()
        offsets, pos = [], start
        for f in frames:
            offsets.append(pos)
            pos += len(f)
        return offsets, self._durable(policy, seq, new)

    def _durable(self, policy: FsyncPolicy, seq: int, new: bool) -> Durable | None:
        if policy == "never":
            return None
        if self.group is not None and (policy == "batch" or self.group.active):
            self.group.note(self.path, new, self.tier, seq)
            return None
        if policy != "always":
            return None
        sync, parent, kept = self._sync, self.path.parent, self._kept

        def durable() -> None:
            sync.wait(seq, kept)
            if new:
                fsync_dir(parent)

        return durable

    def sync(self) -> None:
        """Make every append so far durable (no fsync when an earlier one already covered them)."""
        if self.group is not None:
            self.group.sync_file(self.path)
        else:
            self._sync.wait(None, self._kept)

    def inode(self) -> int:
        """The inode the kept descriptor writes to (0: none kept open)."""
        return self._kept.ino if self._kept is not None else 0

    def close(self) -> None:
        """Close the kept descriptor (a `keep_open` log reopens the file on its next append)."""
        if self._kept is not None:
            with self._lock:
                self._kept.close()

    def read(self) -> list[dict[str, Any]]:
        """Every record (a torn tail skipped, not cut)."""
        return read_records(self.path)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.read())
