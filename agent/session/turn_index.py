"""The turn index: which session of a tenant a turn id belongs to (the store's reservations)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from agent.core.errors import ConfigError, DataCorrupt, SessionNotFound
from agent.session.inbox import _valid
from checkpointing.exceptions import CorruptRecordError, OldFormatError
from checkpointing.fsyncs import atomic_write
from checkpointing.layout import (
    broken_file,
    inbox_file,
    session_dir,
    sessions_root,
    turn_file,
    turns_dir,
)
from checkpointing.records import decode_file, encode_record, read_records
from checkpointing.store.base import Store
from checkpointing.store.file_store import FileStore

log = logging.getLogger(__name__)


class TurnIndex:
    """`tenants/<tenant>/turns/<turn_id>.json`: which session a turn id belongs to.

    Each file holds one framed record `{session_id, turn_id}` (`checkpointing.records`: a flipped
    bit is an error, never another session). Files written before the framing (plain JSON, no
    checksum) are still read as they are: there is nothing in them to verify. A damaged file is
    rebuilt from the one session inbox that holds the turn (`session_of`): the inbox is the record
    of the submission, this file only finds it.
    """

    def __init__(self, base_dir: Path, tenant_id: str) -> None:
        self.tenant_id = _valid(tenant_id, "tenant id")
        self.base_dir = base_dir
        self.dir = turns_dir(base_dir, tenant_id)
        self.store: Store = FileStore(base_dir)

    @classmethod
    def over(cls, store: Store, tenant_id: str) -> TurnIndex:
        """The turn index as the store's reservations (`Store.reserve`: on `files` the same
        `turns/<turn>.json` files; on PostgreSQL rows). On PostgreSQL a damaged reservation is
        `DataCorrupt`: it is not rebuilt from the inboxes (only the file index does that)."""
        index = cls(Path(store.url), tenant_id)
        index.store = store
        return index

    def reserve(self, turn_id: str, session_id: str) -> None:
        """Claim `turn_id` for the session; `ConfigError` when the id was used before."""
        held = self.store.reserve(
            self.tenant_id, _valid(turn_id, "turn id"), {"session_id": session_id, "turn_id": turn_id}
        )
        if held is not None:
            raise ConfigError(f"turn id {turn_id} was used before: give each turn a new id (or none)")

    def session_of(self, turn_id: str) -> str:
        """The session a turn was submitted to; `SessionNotFound` for an unknown id. A damaged
        file is rewritten from the inbox that holds the turn (`DataCorrupt` only when several do)."""
        unknown = SessionNotFound(
            f"no turn {turn_id} in tenant {self.tenant_id}: check the id `agentrt submit` printed and --tenant"
        )
        if not isinstance(self.store, FileStore):
            return self._stored_session_of(_valid(turn_id, "turn id"), unknown)
        # The files store's reservation is a file: one of the format before framing is read as
        # it is, and a damaged one is rebuilt from the inbox that holds the turn.
        path = turn_file(self.base_dir, self.tenant_id, _valid(turn_id, "turn id"))
        try:
            data = path.read_bytes()
        except OSError:
            raise unknown from None
        if not data.strip(b"\x00"):
            raise unknown  # a reservation a crash cut short: its turn was never submitted
        legacy = _legacy_turn(data, turn_id)
        if legacy is not None:
            return legacy
        try:
            doc = decode_file(path, data)
        except CorruptRecordError as err:
            return self._rebuild(path, turn_id, err.reason, unknown)
        session_id = doc.get("session_id")
        if not isinstance(session_id, str) or doc.get("turn_id") != turn_id:
            return self._rebuild(path, turn_id, "it does not name this turn's session", unknown)
        return session_id

    def _stored_session_of(self, turn_id: str, unknown: SessionNotFound) -> str:
        try:
            doc = self.store.reserved(self.tenant_id, turn_id)
        except CorruptRecordError as err:
            raise _damaged(Path(err.path), turn_id, err.reason) from err
        if doc is None:
            raise unknown
        session_id = doc.get("session_id")
        if not isinstance(session_id, str) or doc.get("turn_id") != turn_id:
            raise _damaged(Path(f"turn {turn_id}"), turn_id, "it does not name this turn's session")
        return session_id

    def _rebuild(self, path: Path, turn_id: str, reason: str, unknown: SessionNotFound) -> str:
        """The session of a turn whose index file is damaged, from the one inbox that holds the
        turn; the file is rewritten (its old bytes kept in `<file>.broken`). No inbox holds it: the
        turn was never submitted (`unknown`); more than one: `DataCorrupt`."""
        holders = [sid for sid in self._sessions() if _submitted(self.base_dir, self.tenant_id, sid, turn_id)]
        if not holders:
            raise unknown
        if len(holders) > 1:
            raise _damaged(path, turn_id, f"{reason}; the inboxes of {len(holders)} sessions hold the turn")
        kept = broken_file(path)
        with open(kept, "ab") as fh:
            fh.write(path.read_bytes())
            fh.flush()
            os.fsync(fh.fileno())
        atomic_write(path, encode_record({"session_id": holders[0], "turn_id": turn_id}))
        log.warning("rebuilt the damaged turn index %s (%s) from the inbox of %s", path, reason, holders[0])
        return holders[0]

    def _sessions(self) -> list[str]:
        root = sessions_root(self.base_dir, self.tenant_id)
        try:
            return sorted(p.name for p in root.iterdir() if p.is_dir())
        except OSError:
            return []


def _submitted(base_dir: Path, tenant_id: str, session_id: str, turn_id: str) -> bool:
    """Whether the session's inbox holds the submission of `turn_id` (a damaged inbox: no)."""
    try:
        recs = read_records(inbox_file(session_dir(base_dir, tenant_id, session_id)))
    except (CorruptRecordError, OldFormatError, OSError):
        return False
    return any(r.get("kind") == "submitted" and r.get("turn_id") == turn_id for r in recs)


def _legacy_turn(data: bytes, turn_id: str) -> str | None:
    """The session in a turn file of the format before framing (`{"session_id": ..., "turn_id": ...}`),
    or None: a framed file never parses to exactly these two keys."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict) or set(doc) != {"session_id", "turn_id"} or doc["turn_id"] != turn_id:
        return None
    return doc["session_id"] if isinstance(doc["session_id"], str) else None


def _damaged(path: Path, turn_id: str, reason: str) -> DataCorrupt:
    return DataCorrupt(
        f"{path} is damaged ({reason}): the session of turn {turn_id} is unknown; nothing was changed. "
        "Restore the file from a backup (the turn id is also in its session's inbox.jsonl)"
    )
