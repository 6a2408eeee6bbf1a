"""The outbox on the PostgreSQL record store (`persistence.store: postgres`): what a session layer
missed, kept in the store, not under a machine's base_dir.

The same records as `outbox.py` (`owe`, `paid`; framed and checksummed like every store record),
in the session's stream `@outbox`. With base_dir only a local cache, a debt kept there would be
lost with the machine: here any machine that next reads the session, or whose retrier or doctor
runs, sees and replays it. The stream exists only while something is owed: `settle` drops it, in
one transaction that first checks no debt was appended since it read (`replace_if`), so "is
anything owed?" is one indexed lookup of the stream's head, and `due` lists the sessions that
hold the stream. A row that fails its checksum stops reads with `DataCorrupt` (as a damaged line
does); `repair` replaces the stream with one debt of every kind to every layer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.errors import DataCorrupt
from agent.session.outbox import Debt, Lag, Owed, every_debt, lags_of, newest_debts, owe_record, unpaid_debts
from checkpointing.errors import CorruptRecordError, OldFormatError
from checkpointing.ids import validate_id
from checkpointing.layout import is_id
from checkpointing.records import Scan, encode_record
from checkpointing.store.base import OUTBOX
from checkpointing.store.postgres import PostgresSessionStreams, PostgresStore

log = logging.getLogger("agentrt.sessions")

_SETTLE_TRIES = 20


class StoreOutbox:
    """The outboxes of the sessions of one PostgreSQL record store (the API of `outbox.Outbox`)."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def _streams(self, tenant_id: str, session_id: str) -> PostgresSessionStreams:
        validate_id(tenant_id, "tenant_id")
        validate_id(session_id, "session_id")
        return self.store.session(tenant_id, session_id, "always")

    def path(self, tenant_id: str, session_id: str) -> Path:
        """The outbox's name in messages (the store's label of the stream)."""
        return self._streams(tenant_id, session_id).path(OUTBOX)

    def _scan(self, streams: PostgresSessionStreams) -> Scan:
        try:
            return streams.scan(OUTBOX)
        except (CorruptRecordError, OldFormatError) as err:
            raise DataCorrupt(
                f"{streams.path(OUTBOX)}:{err.line}: damaged outbox record ({err.reason}); nothing was changed. "
                f"Run `agentrt doctor {streams.thread} --repair`: it replaces the outbox and replays every "
                "layer from the source of truth"
            ) from err

    def owe(self, tenant_id: str, session_id: str, layer: str, what: Owed) -> None:
        """Record durably (committed) that `layer` missed a write of `what` for this session."""
        self._streams(tenant_id, session_id).append(OUTBOX, [encode_record(owe_record(layer, what))], "always", None)

    def owes(self, tenant_id: str, session_id: str) -> bool:
        """Whether anything may be owed (one lookup: the stream exists only while something is)."""
        return self._streams(tenant_id, session_id).head(OUTBOX)[0] > 0

    def _unpaid(self, tenant_id: str, session_id: str) -> list[tuple[int, dict[str, Any]]]:
        streams = self._streams(tenant_id, session_id)
        return unpaid_debts(self._scan(streams))

    def debts(self, tenant_id: str, session_id: str) -> list[Debt]:
        """The unpaid debts in the order they were recorded (one per layer and kind: the newest)."""
        return newest_debts(self._unpaid(tenant_id, session_id))

    def behind(self, tenant_id: str, session_id: str) -> dict[str, Lag]:
        """How far behind each owed layer is: its unpaid writes and since when (read-only)."""
        return lags_of(self._unpaid(tenant_id, session_id))

    def due(self, tenant_id: str) -> list[str]:
        """The tenant's sessions whose outbox owes anything, sorted."""
        validate_id(tenant_id, "tenant_id")
        return [sid for _, sid in self.store.outbox_holders(tenant_id)]

    def debtors(self, tenants: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """(tenant, session) of every session that owes anything, in `tenants` (None: every
        tenant of the store), sorted: one read of an index, no session's records."""
        if tenants is not None:
            return [(tenant, sid) for tenant in tenants for sid in self.due(tenant)]
        return [(t, s) for t, s in self.store.outbox_holders() if is_id(t) and is_id(s)]

    def repair(self, tenant_id: str, session_id: str) -> str | None:
        """Replace a damaged outbox by one debt of every kind to every layer (logged); None when it
        verifies. A row cannot be torn: there is no tail to cut."""
        streams = self._streams(tenant_id, session_id)
        try:
            streams.scan(OUTBOX)
            return None
        except (CorruptRecordError, OldFormatError) as err:
            streams.replace(OUTBOX, [encode_record(r) for r in every_debt()])
            log.warning(
                "outbox %s is damaged at line %d (%s): replaced; every layer is owed a full replay",
                streams.path(OUTBOX),
                err.line,
                err.reason,
            )
            return (
                f"replaced the damaged {streams.path(OUTBOX)} (line {err.line}: {err.reason}); "
                "every layer is owed a full replay"
            )

    def settle(self, tenant_id: str, session_id: str, layer: str, upto: int) -> None:
        """Mark `layer`'s debts up to position `upto` paid; drop the stream when nothing is owed any
        more. Both only while no debt was appended since the read (else read again)."""
        streams = self._streams(tenant_id, session_id)
        paid = encode_record({"kind": "paid", "layer": layer, "upto": upto})
        for _ in range(_SETTLE_TRIES):
            found = self._scan(streams)
            if not found.records:
                return
            rest = [d for d in newest_debts(unpaid_debts(found)) if not (d.layer == layer and d.offset <= upto)]
            if not rest:
                if streams.replace_if(OUTBOX, [], found.good):
                    return
                continue
            if streams.append_if(OUTBOX, [paid], found.good) is not None:
                return
        log.warning(
            "outbox %s: could not settle %s (debts kept being added); it stays owed",
            self.path(tenant_id, session_id),
            layer,
        )

    def pending_layers(self, tenant_id: str, session_id: str) -> set[str]:
        """The layers this session still owes something to."""
        return {d.layer for d in self.debts(tenant_id, session_id)}
