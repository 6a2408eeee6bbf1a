"""The outbox on the record store: what a session layer missed, kept until it is written there.

The records of `outbox.py` (`owe`, `paid`; framed and checksummed like every store record) in the
session's stream `@outbox`, on either backend: on `files` the session folder's `outbox.jsonl`, on
PostgreSQL its rows, so with base_dir only a local cache any machine that next reads the session,
or whose retrier, sweep or doctor runs, sees and replays a debt.

Every write is a compare-and-swap on the end the writer read (`append_if`, `replace_if`), so
concurrent writers never interleave and a settle never drops a debt appended after its read. The
stream holds something only while something is owed: the settle that pays the last debt empties
it, so "is anything owed?" is one lookup of the stream's head, and the store lists the sessions
holding one from an index (`Store.holding`, `Store.outbox_holders`: due markers on files, a partial
index on PostgreSQL).

A torn last line (a crash mid-append; only files have one) is a debt nobody can read: a read
counts it as one debt of every kind to every layer (replaying too much is harmless, forgetting a
debt is not), and the next append cuts it to `outbox.jsonl.broken` and writes those debts in its
place. A complete line (or row) that does not verify stops every read with `DataCorrupt` naming
it and the line; `repair` (the explicit step of `agentrt doctor ID --repair`, logged) keeps the
damaged bytes (`outbox.jsonl.broken` on files) and replaces the stream with one debt of every
kind to every layer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from agent.core.errors import DataCorrupt
from checkpointing.exceptions import CorruptRecordError, OldFormatError
from checkpointing.fsyncs import fsync_fd
from checkpointing.ids import validate_id
from checkpointing.layout import OUTBOX_FILE, broken_file, is_id
from checkpointing.records import FsyncPolicy, Scan, encode_record, loads
from checkpointing.store.base import OUTBOX, SessionStreams, Store
from checkpointing.store.file_store import FileStore
from checkpointing.store.files import FileSessionStreams

log = logging.getLogger("agentrt.sessions")

__all__ = ["LAYERS", "OUTBOX_FILE", "Debt", "Lag", "Outbox", "Owed", "SessionOutbox", "StoreOutbox"]

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


_SETTLE_TRIES = 20


_WRITE_TRIES = 50


class StoreOutbox:
    """The outboxes of the sessions of one record store (`SessionOutbox`)."""

    def __init__(self, store: Store, fsync: FsyncPolicy = "always") -> None:
        self.store = store
        self.fsync: FsyncPolicy = fsync
        """The policy of the sessions' streams (a replace that empties the outbox syncs unless "never")."""

    def _streams(self, tenant_id: str, session_id: str) -> SessionStreams:
        validate_id(tenant_id, "tenant_id")
        validate_id(session_id, "session_id")
        return self.store.session(tenant_id, session_id, self.fsync)

    def path(self, tenant_id: str, session_id: str) -> Path:
        """The outbox's name in messages (the store's label of the stream)."""
        return self._streams(tenant_id, session_id).path(OUTBOX)

    def _scan(self, streams: SessionStreams) -> Scan:
        try:
            return streams.scan(OUTBOX)
        except (CorruptRecordError, OldFormatError) as err:
            raise DataCorrupt(
                f"{streams.path(OUTBOX)}:{err.line}: damaged outbox record ({err.reason}); nothing was changed. "
                f"Run `agentrt doctor {streams.thread} --repair`: it replaces the outbox and replays every "
                "layer from the source of truth"
            ) from err

    def _append_if(self, streams: SessionStreams, found: Scan, frames: list[bytes]) -> bool:
        """Append `frames` at the end `found` read (a torn tail is cut and replaced by every debt)."""
        if found.torn:
            frames = [encode_record(r) for r in every_debt()] + frames
        return streams.append_if(OUTBOX, frames, found.size) is not None

    def owe(self, tenant_id: str, session_id: str, layer: str, what: Owed) -> None:
        """Record durably that `layer` missed a write of `what` for this session."""
        streams = self._streams(tenant_id, session_id)
        frame = encode_record(owe_record(layer, what))
        for _ in range(_WRITE_TRIES):
            if self._append_if(streams, self._scan(streams), [frame]):
                return
        streams.append(OUTBOX, [frame], "always", None)  # never lose a debt to a busy stream

    def owes(self, tenant_id: str, session_id: str) -> bool:
        """Whether anything may be owed (one lookup: the stream exists only while something is)."""
        return self._streams(tenant_id, session_id).head(OUTBOX)[0] > 0

    def _unpaid(self, tenant_id: str, session_id: str) -> list[tuple[int, dict[str, Any]]]:
        found = self._scan(self._streams(tenant_id, session_id))
        return unpaid_debts(found, found.good if found.torn else None)

    def debts(self, tenant_id: str, session_id: str) -> list[Debt]:
        """The unpaid debts in the order they were recorded (one per layer and kind: the newest)."""
        return newest_debts(self._unpaid(tenant_id, session_id))

    def behind(self, tenant_id: str, session_id: str) -> dict[str, Lag]:
        """How far behind each owed layer is: its unpaid writes and since when (read-only)."""
        return lags_of(self._unpaid(tenant_id, session_id))

    def due(self, tenant_id: str) -> list[str]:
        """The tenant's sessions whose outbox owes anything, sorted (read from the store's index)."""
        validate_id(tenant_id, "tenant_id")
        return self.store.holding(tenant_id, OUTBOX)

    def debtors(self, tenants: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """(tenant, session) of every session that owes anything, in `tenants` (None: every
        tenant of the store), sorted: read from the store's index, no session's records."""
        if tenants is not None:
            return [(tenant, sid) for tenant in tenants for sid in self.due(tenant)]
        return [(t, s) for t, s in self.store.outbox_holders() if is_id(t) and is_id(s)]

    def repair(self, tenant_id: str, session_id: str) -> str | None:
        """The explicit repair of a damaged outbox (`agentrt doctor ID --repair`, under the lease).

        A torn last record is cut to `outbox.jsonl.broken` and replaced by every debt; a stream
        damaged elsewhere is replaced whole by every debt (on files its bytes are kept in
        `outbox.jsonl.broken`). Logged at WARNING; returns what was done (None: it verifies).
        """
        streams = self._streams(tenant_id, session_id)
        path = streams.path(OUTBOX)
        try:
            found = streams.scan(OUTBOX)
        except (CorruptRecordError, OldFormatError) as err:
            kept = self._keep_damaged(streams)
            streams.replace(OUTBOX, [encode_record(r) for r in every_debt()])
            log.warning(
                "outbox %s is damaged at line %d (%s): replaced; every layer is owed a full replay",
                path,
                err.line,
                err.reason,
            )
            aside = f"moved the damaged {path} aside to {kept.name}" if kept else f"replaced the damaged {path}"
            return f"{aside} (line {err.line}: {err.reason}); every layer is owed a full replay"
        if not found.torn:
            return None
        for _ in range(_WRITE_TRIES):
            if self._append_if(streams, found, []):
                break
            found = self._scan(streams)
        log.warning("outbox %s: a torn last record was cut; every layer is owed a full replay", path)
        return f"cut the torn tail of {path} (kept in {broken_file(path).name}); every layer is owed a full replay"

    @staticmethod
    def _keep_damaged(streams: SessionStreams) -> Path | None:
        """On files, append the damaged file's bytes to `outbox.jsonl.broken` (fsynced)."""
        if not isinstance(streams, FileSessionStreams):
            return None
        path = streams.path(OUTBOX)
        kept = broken_file(path)
        with open(kept, "ab") as out:
            out.write(path.read_bytes())
            out.flush()
            fsync_fd(out.fileno())
        return kept

    def settle(self, tenant_id: str, session_id: str, layer: str, upto: int) -> None:
        """Mark `layer`'s debts up to position `upto` paid; drop the stream when nothing is owed any
        more. Both only while no debt was appended since the read (else read again)."""
        streams = self._streams(tenant_id, session_id)
        paid = encode_record({"kind": "paid", "layer": layer, "upto": upto})
        for _ in range(_SETTLE_TRIES):
            found = self._scan(streams)
            if not found.records and not found.torn:
                return
            rest = [d for d in newest_debts(unpaid_debts(found)) if not (d.layer == layer and d.offset <= upto)]
            if not rest and not found.torn:
                if streams.replace_if(OUTBOX, [], found.size):
                    return
                continue
            if self._append_if(streams, found, [paid]):
                return
        log.warning(
            "outbox %s: could not settle %s (debts kept being added); it stays owed",
            self.path(tenant_id, session_id),
            layer,
        )

    def pending_layers(self, tenant_id: str, session_id: str) -> set[str]:
        """The layers this session still owes something to."""
        return {d.layer for d in self.debts(tenant_id, session_id)}


class Outbox(StoreOutbox):
    """The outboxes of the sessions under `base_dir` (the `files` store)."""

    def __init__(self, base_dir: Path | str, fsync: bool = True) -> None:
        super().__init__(FileStore(base_dir), "always" if fsync else "never")
        self.base_dir = Path(base_dir)
