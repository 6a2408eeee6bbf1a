"""The durable outbox: what a session layer missed while it was down, kept until it is written there.

One file per session, `outbox.jsonl` beside its `events.jsonl`, a record log of
`checkpointing.records` (framing, checksum, torn-tail rule). Two record kinds:

- `{"kind": "owe", "layer": L, "what": W, "at": T}`: layer L (`SQL`, `L2`) missed a write of W:
  `session` (the session row / cached document) or `messages` (chat_messages rows), at time T
  (ISO 8601 UTC; what `behind` reports as "since");
- `{"kind": "paid", "layer": L, "upto": OFFSET}`: every `owe` of L at a byte offset <= OFFSET
  has been replayed.

A debt names what is stale, not the stale data: replaying it writes the newest copy from the
source of truth (the session document from JSONL, the page rows from the event log), so a replay
is idempotent, runs in the order the debts were recorded, and survives the process being killed
at any point (an unpaid debt is simply replayed again by the next process that reads the session).
When nothing is owed any more the file is truncated to empty, so the common case ("is anything
owed?") is one `stat`. Appends and the truncation hold an exclusive `flock` on the file, reads a
shared one. While a session owes anything, an empty marker `tenants/<tenant>/outbox-due/<session>`
exists (made before the first debt is written, removed after the file is emptied), so finding the
sessions that owe (`due`, what `agentrt doctor` lists) reads one folder, never every session's.

Reads never change the file. A torn last line (a crash mid-append) is a debt nobody can read: a
read counts it as one debt of every kind to every layer (replaying too much is harmless,
forgetting a debt is not), and the next append (`owe`, `settle`) cuts it to `outbox.jsonl.broken`
(logged by `records.cut_torn_tail`) and writes those debts in its place. A complete line that
does not verify stops every read with `DataCorrupt` naming the file and line; `repair` (the
explicit step of `agentrt doctor ID --repair`, logged) moves the file aside to
`outbox.jsonl.broken` and replaces it with one debt of every kind to every layer.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from agent.errors import DataCorrupt
from checkpointing.errors import CorruptRecordError, OldFormatError
from checkpointing.layout import (
    OUTBOX_FILE,
    broken_file,
    is_id,
    outbox_due_dir,
    outbox_file,
    session_dir,
    tenants_root,
)
from checkpointing.records import RecordLog, Scan, cut_torn_tail, encode_record, fsync_dir, fsync_fd, loads, scan

log = logging.getLogger("agentrt.sessions")

__all__ = ["LAYERS", "OUTBOX_FILE", "Debt", "Lag", "Outbox", "Owed", "SessionOutbox"]

LAYERS = ("SQL", "L2")
"""The layers an outbox can owe writes to."""


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


@dataclass(frozen=True)
class Lag:
    """How far behind one layer is for one session: its unpaid writes and the oldest one's time."""

    changes: int
    """Unpaid `owe` records (each a write the layer missed; a torn record counts as one)."""
    since: str | None
    """When the oldest of them was missed (ISO 8601 UTC; None when no record says)."""


def every_debt() -> list[dict[str, Any]]:
    """One `owe` of every kind to every layer: what an unreadable debt may have been."""
    return [{"kind": "owe", "layer": layer, "what": what.value} for layer in LAYERS for what in Owed]


def owe_record(layer: str, what: Owed) -> dict[str, Any]:
    """The `owe` record of a write `layer` missed now."""
    return {"kind": "owe", "layer": layer, "what": what.value, "at": datetime.now(UTC).isoformat(timespec="seconds")}


def unpaid_debts(found: Scan, torn_at: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    """Every unpaid `owe` record (offset, record) of a scanned outbox, in order; a torn tail at
    `torn_at` counts as every debt (where the next append writes them in its place)."""
    records = [(off, loads(body)) for off, body in found.records]
    paid: dict[str, int] = {}
    for _, rec in records:
        if rec.get("kind") == "paid":
            paid[str(rec["layer"])] = max(paid.get(str(rec["layer"]), -1), int(rec["upto"]))
    if torn_at is not None:
        records += [(torn_at, rec) for rec in every_debt()]
    return [
        (offset, rec)
        for offset, rec in records
        if rec.get("kind") == "owe" and offset > paid.get(str(rec["layer"]), -1)
    ]


def newest_debts(unpaid: list[tuple[int, dict[str, Any]]]) -> list[Debt]:
    """One debt per layer and kind (the newest), in the order of those newest records."""
    newest: dict[tuple[str, Owed], Debt] = {}
    for offset, rec in unpaid:
        key = (str(rec["layer"]), Owed(rec["what"]))
        newest.pop(key, None)  # keep the order of the newest record of each kind
        newest[key] = Debt(key[0], key[1], offset)
    return list(newest.values())


def lags_of(unpaid: list[tuple[int, dict[str, Any]]]) -> dict[str, Lag]:
    """How far behind each layer is, from its unpaid records."""
    lags: dict[str, Lag] = {}
    for _, rec in unpaid:
        layer, at = str(rec["layer"]), rec.get("at")
        old = lags.get(layer, Lag(0, None))
        since = old.since if old.since is not None or not isinstance(at, str) else at
        lags[layer] = Lag(old.changes + 1, since)
    return lags


class SessionOutbox(Protocol):
    """What the manager and the doctor use of an outbox, on either store (`Outbox`, `StoreOutbox`)."""

    def path(self, tenant_id: str, session_id: str) -> Path: ...
    def owe(self, tenant_id: str, session_id: str, layer: str, what: Owed) -> None: ...
    def owes(self, tenant_id: str, session_id: str) -> bool: ...
    def debts(self, tenant_id: str, session_id: str) -> list[Debt]: ...
    def behind(self, tenant_id: str, session_id: str) -> dict[str, Lag]: ...
    def due(self, tenant_id: str) -> list[str]: ...
    def debtors(self, tenants: Sequence[str] | None = None) -> list[tuple[str, str]]: ...
    def repair(self, tenant_id: str, session_id: str) -> str | None: ...
    def settle(self, tenant_id: str, session_id: str, layer: str, upto: int) -> None: ...
    def pending_layers(self, tenant_id: str, session_id: str) -> set[str]: ...


class Outbox:
    """The outbox files of the sessions under one `base_dir` (the `files` store; `StoreOutbox` in
    `outbox_store.py` is the same outbox on the PostgreSQL record store)."""

    def __init__(self, base_dir: Path | str, fsync: bool = True) -> None:
        self.base_dir = Path(base_dir)
        self.fsync = fsync

    def path(self, tenant_id: str, session_id: str) -> Path:
        """`base_dir/tenants/<tenant>/sessions/<session>/outbox.jsonl`."""
        return outbox_file(session_dir(self.base_dir, tenant_id, session_id))

    @contextmanager
    def _locked(self, path: Path, create: bool = False, shared: bool = False) -> Iterator[int | None]:
        flags = (os.O_RDONLY if shared else os.O_RDWR) | (os.O_CREAT if create else 0)
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)

    def _scan(self, path: Path) -> Scan:
        try:
            return scan(path)
        except (CorruptRecordError, OldFormatError) as err:
            raise DataCorrupt(
                f"{path}:{err.line}: damaged outbox record ({err.reason}); nothing was changed. Run "
                f"`agentrt doctor {path.parent.name} --repair`: it moves the file aside to {broken_file(path).name} "
                "and replays every layer from the source of truth"
            ) from err

    def _due_marker(self, path: Path) -> Path:
        """`tenants/<tenant>/outbox-due/<session>` of the outbox at `path`."""
        session = path.parent
        return outbox_due_dir(self.base_dir, session.parent.parent.name) / session.name

    def _append(self, path: Path, records: list[dict[str, Any]]) -> None:
        """Append under the exclusive lock; a crash's torn tail is first replaced by every debt."""
        frames = [encode_record(r) for r in records]
        found = self._scan(path)
        if found.torn:
            cut_torn_tail(path, found.good)
            frames = [encode_record(r) for r in every_debt()] + frames
        if not frames:
            return
        if found.size == 0 and any(r.get("kind") == "owe" for r in records):
            marker = self._due_marker(path)  # before the debt: a crash leaves a marker, never a debt unlisted
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        RecordLog(path, fsync="always" if self.fsync else "never").append_frames(frames)

    def owe(self, tenant_id: str, session_id: str, layer: str, what: Owed) -> None:
        """Record durably that `layer` missed a write of `what` for this session."""
        path = self.path(tenant_id, session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        with self._locked(path, create=True):
            self._append(path, [owe_record(layer, what)])
        if new and self.fsync:
            fsync_dir(path.parent)

    def owes(self, tenant_id: str, session_id: str) -> bool:
        """Whether anything may be owed (one stat; the file is empty once everything is paid)."""
        try:
            return self.path(tenant_id, session_id).stat().st_size > 0
        except FileNotFoundError:
            return False

    def debts(self, tenant_id: str, session_id: str) -> list[Debt]:
        """The unpaid debts in the order they were recorded (one per layer and kind: the newest).

        Read-only. A torn last record counts as every debt (see the module doc); a damaged one
        raises `DataCorrupt` naming the file and line (`repair` is the explicit fix).
        """
        if not self.owes(tenant_id, session_id):
            return []
        path = self.path(tenant_id, session_id)
        with self._locked(path, shared=True) as fd:
            return [] if fd is None else self._debts_in(path)

    def _unpaid_in(self, path: Path) -> list[tuple[int, dict[str, Any]]]:
        """Every unpaid `owe` record (offset, record) in file order (a torn tail: every debt)."""
        found = self._scan(path)
        return unpaid_debts(found, found.good if found.torn else None)

    def _debts_in(self, path: Path) -> list[Debt]:
        return newest_debts(self._unpaid_in(path))

    def behind(self, tenant_id: str, session_id: str) -> dict[str, Lag]:
        """How far behind each owed layer is: its unpaid writes and since when (read-only)."""
        if not self.owes(tenant_id, session_id):
            return {}
        path = self.path(tenant_id, session_id)
        with self._locked(path, shared=True) as fd:
            unpaid = [] if fd is None else self._unpaid_in(path)
        return lags_of(unpaid)

    def due(self, tenant_id: str) -> list[str]:
        """The tenant's sessions whose outbox owes anything (one folder read, no walk), sorted."""
        try:
            names = sorted(p.name for p in outbox_due_dir(self.base_dir, tenant_id).iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [n for n in names if is_id(n) and self.owes(tenant_id, n)]

    def debtors(self, tenants: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """(tenant, session) of every session that owes anything, in `tenants` (None: every tenant
        of base_dir), sorted: one folder read for the tenants, one per tenant for its markers."""
        if tenants is None:
            try:
                tenants = sorted(p.name for p in tenants_root(self.base_dir).iterdir() if is_id(p.name))
            except (FileNotFoundError, NotADirectoryError):
                return []
        return [(tenant, sid) for tenant in tenants for sid in self.due(tenant)]

    def repair(self, tenant_id: str, session_id: str) -> str | None:
        """The explicit repair of a damaged outbox (`agentrt doctor ID --repair`, under the lease).

        A torn last record is cut to `outbox.jsonl.broken` and replaced by every debt; a file
        damaged elsewhere is moved there whole and replaced by every debt. Logged at WARNING;
        returns what was done (None: the file verifies, nothing to do).
        """
        path = self.path(tenant_id, session_id)
        with self._locked(path) as fd:
            if fd is None:
                return None
            try:
                found = scan(path)
            except (CorruptRecordError, OldFormatError) as err:
                return self._replace(path, fd, err)
            if not found.torn:
                return None
            self._append(path, [])
        log.warning("outbox %s: a torn last record was cut; every layer is owed a full replay", path)
        return f"cut the torn tail of {path} (kept in {broken_file(path).name}); every layer is owed a full replay"

    def _replace(self, path: Path, fd: int, err: CorruptRecordError | OldFormatError) -> str:
        broken = broken_file(path)
        size = os.fstat(fd).st_size
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, size)
        with open(broken, "ab") as out:
            out.write(data)
            out.flush()
            fsync_fd(out.fileno())
        os.ftruncate(fd, 0)
        self._append(path, every_debt())
        log.warning(
            "outbox %s is damaged at line %d (%s): %d bytes moved to %s; every layer is owed a full replay",
            path,
            err.line,
            err.reason,
            size,
            broken,
        )
        return (
            f"moved the damaged {path} aside to {broken.name} (line {err.line}: {err.reason}); "
            "every layer is owed a full replay"
        )

    def settle(self, tenant_id: str, session_id: str, layer: str, upto: int) -> None:
        """Mark `layer`'s debts up to byte `upto` paid; empty the file when nothing is owed any more."""
        path = self.path(tenant_id, session_id)
        with self._locked(path) as fd:
            if fd is None:
                return
            self._append(path, [{"kind": "paid", "layer": layer, "upto": upto}])
            if not self._debts_in(path):
                os.ftruncate(fd, 0)  # under the lock: no append can slip in between
                if self.fsync:
                    os.fsync(fd)
                self._due_marker(path).unlink(missing_ok=True)

    def pending_layers(self, tenant_id: str, session_id: str) -> set[str]:
        """The layers this session still owes something to."""
        return {d.layer for d in self.debts(tenant_id, session_id)}
