"""The durable outbox: what a session layer missed while it was down, kept until it is written there.

One file per session, `outbox.jsonl` beside its `events.jsonl`, framed like every record log
(checkpointing/records.py: canonical JSON + checksum a line). Two record kinds:

- `{"kind": "owe", "layer": L, "what": W}`: layer L (`SQL`, `L2`) missed a write of W:
  `session` (the session row / cached document) or `messages` (chat_messages rows);
- `{"kind": "paid", "layer": L, "upto": OFFSET}`: every `owe` of L at a byte offset <= OFFSET
  has been replayed.

A debt names what is stale, not the stale data: replaying it writes the newest copy from the
source of truth (the session document from JSONL, the page rows from the event log), so a replay
is idempotent, runs in the order the debts were recorded, and survives the process being killed
at any point (an unpaid debt is simply replayed again by the next process that reads the session).
When nothing is owed any more the file is truncated to empty, so the common case ("is anything
owed?") is one `stat`. Appends and the truncation hold an exclusive `flock` on the file. A damaged
outbox (a torn or corrupt line) is moved aside to `outbox.jsonl.broken` and replaced by one debt of
every kind to every layer: replaying too much is harmless, forgetting a debt is not.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from checkpointing.errors import CorruptRecordError
from checkpointing.events import session_dir
from checkpointing.records import encode_record, fsync_dir, read_records_with_offsets, scan

log = logging.getLogger("agentrt.sessions")

OUTBOX_FILE = "outbox.jsonl"


class Owed(StrEnum):
    """What a layer missed."""

    SESSION = "session"
    """The session document (SQL `sessions` row, Redis value)."""
    MESSAGES = "messages"
    """Page-history rows (SQL `chat_messages`)."""


@dataclass(frozen=True)
class Debt:
    """One unpaid `owe` record."""

    layer: str
    what: Owed
    offset: int
    """Byte offset of the record in the outbox (what `settle` pays up to)."""


class Outbox:
    """The outbox files of the sessions under one `base_dir`."""

    def __init__(self, base_dir: Path | str, fsync: bool = True) -> None:
        self.base_dir = Path(base_dir)
        self.fsync = fsync

    def path(self, tenant_id: str, session_id: str) -> Path:
        """`base_dir/tenants/<tenant>/sessions/<session>/outbox.jsonl`."""
        return session_dir(self.base_dir, tenant_id, session_id) / OUTBOX_FILE

    @contextmanager
    def _locked(self, path: Path, create: bool) -> Iterator[int | None]:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)

    def owe(self, tenant_id: str, session_id: str, layer: str, what: Owed) -> None:
        """Record durably that `layer` missed a write of `what` for this session."""
        path = self.path(tenant_id, session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        frame = encode_record({"kind": "owe", "layer": layer, "what": what.value})
        with self._locked(path, create=True) as fd:
            assert fd is not None
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, frame)
            if self.fsync:
                os.fsync(fd)
        if new and self.fsync:
            fsync_dir(path.parent)

    def owes(self, tenant_id: str, session_id: str) -> bool:
        """Whether anything may be owed (one stat; the file is empty once everything is paid)."""
        try:
            return self.path(tenant_id, session_id).stat().st_size > 0
        except FileNotFoundError:
            return False

    def debts(self, tenant_id: str, session_id: str, repair: bool = True) -> list[Debt]:
        """The unpaid debts in the order they were recorded (one per layer and kind: the newest).

        A damaged file is replaced (see the module doc) unless `repair` is false (read-only callers
        such as the doctor): then `CorruptRecordError` is raised.
        """
        if not self.owes(tenant_id, session_id):
            return []
        path = self.path(tenant_id, session_id)
        try:
            if repair and scan(path).torn:
                # A debt whose record was cut off mid-write is unknown: treated as damage (full replay).
                raise CorruptRecordError(str(path), -1, "torn last record")
            records = read_records_with_offsets(path, repair=False)
        except CorruptRecordError as err:
            if not repair:
                raise
            records = self._replace_damaged(tenant_id, session_id, err)
        paid: dict[str, int] = {}
        for _, rec in records:
            if rec.get("kind") == "paid":
                paid[str(rec["layer"])] = max(paid.get(str(rec["layer"]), -1), int(rec["upto"]))
        newest: dict[tuple[str, Owed], Debt] = {}
        for offset, rec in records:
            if rec.get("kind") != "owe" or offset <= paid.get(str(rec["layer"]), -1):
                continue
            key = (str(rec["layer"]), Owed(rec["what"]))
            newest.pop(key, None)  # keep the order of the newest record of each kind
            newest[key] = Debt(key[0], key[1], offset)
        return list(newest.values())

    def _replace_damaged(self, tenant_id: str, session_id: str, err: Exception) -> list[tuple[int, dict[str, Any]]]:
        path = self.path(tenant_id, session_id)
        log.warning("outbox %s is damaged (%s): kept as .broken; every layer gets a full replay", path, err)
        with self._locked(path, create=True) as fd:
            assert fd is not None
            with open(path.with_name(path.name + ".broken"), "ab") as broken:
                os.lseek(fd, 0, os.SEEK_SET)
                broken.write(os.read(fd, max(0, os.fstat(fd).st_size)))
            os.ftruncate(fd, 0)
            frames = [
                encode_record({"kind": "owe", "layer": layer, "what": what.value})
                for layer in ("SQL", "L2")
                for what in Owed
            ]
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, b"".join(frames))
            if self.fsync:
                os.fsync(fd)
        return read_records_with_offsets(path, repair=False)

    def settle(self, tenant_id: str, session_id: str, layer: str, upto: int) -> None:
        """Mark `layer`'s debts up to byte `upto` paid; empty the file when nothing is owed any more."""
        path = self.path(tenant_id, session_id)
        with self._locked(path, create=False) as fd:
            if fd is None:
                return
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, encode_record({"kind": "paid", "layer": layer, "upto": upto}))
            if self.fsync:
                os.fsync(fd)
            if not self.debts(tenant_id, session_id):
                os.ftruncate(fd, 0)  # under the lock: no append can slip in between
                if self.fsync:
                    os.fsync(fd)

    def pending_layers(self, tenant_id: str, session_id: str) -> set[str]:
        """The layers this session still owes something to."""
        return {d.layer for d in self.debts(tenant_id, session_id)}
