"""A session's inbox: the turns submitted to it, in submission order, and what became of each.

The inbox is session stream `INBOX` of the session in the record store (on `files` the session
folder's `inbox.jsonl`; on PostgreSQL its rows). It holds framed records (checkpointing's record
framing: canonical JSON + checksum, torn-tail rule), each appended with `append_if` the end its
writer read (retried when another writer appended first), so submitters and workers on several
machines never interleave:

    submitted  {turn_id, text, user_id}        the turn exists (durable before it is enqueued);
               + live: true                    its worker publishes live events (agent/live.py)
               + resume: true, decision        a continuation: resume the session's unfinished
                                               run (with the human's decision), no new text
    started    {turn_id, baseline_run_id}      a worker is about to run it; the session's last run
                                               id before, so a crash tells "not yet run" from "ran"
    paused     {turn_id, run_id}               its run waits for a human approval
    decision   {turn_id, decision[, live]}     the human answered; the turn is pending again
    done       {turn_id, status, run_id, ...}  its run ended (COMPLETED or FAILED)

A turn's status is its last record's: the worker that holds the session's drain lease takes the
first turn that is not finished, in submission order. `turns/<turn_id>.json` under the tenant
maps a turn id to its session (one framed record, created exclusively: a turn id is used once per
tenant).

The turn index is the store's reservations (`Store.reserve`: on `files` the same
`turns/<turn>.json` files; on PostgreSQL rows).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from agent.errors import ConfigError, DataCorrupt, SessionNotFound
from checkpointing.exceptions import CorruptRecordError, InvalidIdError, OldFormatError
from checkpointing.ids import validate_id
from checkpointing.layout import (
    broken_file,
    inbox_file,
    session_dir,
    sessions_root,
    turn_file,
    turns_dir,
)
from checkpointing.records import Scan, atomic_write, decode_file, encode_record, read_records
from checkpointing.store.base import INBOX, SessionStreams, Store
from checkpointing.store.files import FileStore

log = logging.getLogger(__name__)


class TurnStatus(StrEnum):
    """Where a submitted turn stands."""

    PENDING = "PENDING"  # submitted (or approved after a pause), not running
    RUNNING = "RUNNING"  # a worker started it (or died while running it)
    PAUSED = "PAUSED"  # waits for a human approval: `agentrt resume ID --approve`
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"

    @property
    def settled(self) -> bool:
        """Whether a waiting caller may stop waiting (nothing more happens without a human)."""
        return self in (TurnStatus.PAUSED, TurnStatus.COMPLETED, TurnStatus.FAILED)


@dataclass
class Turn:
    """One submitted turn, folded from its inbox records."""

    turn_id: str
    tenant_id: str
    session_id: str
    text: str
    user_id: str | None
    submitted_at: float
    status: TurnStatus = TurnStatus.PENDING
    baseline_run_id: str | None = None  # the session's last run id ("" for none) when it first started
    decision: dict[str, Any] | None = None  # the approval to apply on the next pass
    result: dict[str, Any] = field(default_factory=dict)  # `done`/`paused` payload: status, run_id, answer...
    attempts: int = 0  # how many times a worker started it (more than one: it was resumed)
    live: bool = False  # its worker publishes live events for `agentrt serve` (agent/live.py)
    resume: bool = False  # continues the session's unfinished run instead of starting one with `text`
    new_session: bool = False  # submitted with --new-session: its run creates the session

    @property
    def finished(self) -> bool:
        """COMPLETED or FAILED: a redelivered task has nothing to do."""
        return self.status in (TurnStatus.COMPLETED, TurnStatus.FAILED)

    def to_json(self) -> dict[str, Any]:
        """The turn as `agentrt wait --json` prints it."""
        return {
            "turn_id": self.turn_id,
            "tenant_id": self.tenant_id,
            "session_id": self.session_id,
            "status": self.status.value,
            "attempts": self.attempts,
            **{k: v for k, v in self.result.items() if k not in ("turn_id", "status")},
        }


def new_turn_id() -> str:
    """A fresh turn id (a random UUID: never derived from the text, so equal texts are two turns)."""
    return str(uuid.uuid4())


class Inbox:
    """The inbox of one session: session stream `INBOX` of its store session (`over`);
    `Inbox(base_dir, ...)` is the inbox on the `files` store of `base_dir`."""

    def __init__(self, base_dir: Path, tenant_id: str, session_id: str) -> None:
        tenant, session = _valid(tenant_id, "tenant id"), _valid(session_id, "session id")
        self._attach(FileStore(base_dir).session(tenant, session, "always"))

    @classmethod
    def over(cls, streams: SessionStreams) -> Inbox:
        """The inbox as session stream `INBOX` of a store's session (files: `inbox.jsonl`;
        PostgreSQL: its rows). Each append is `append_if` the end the writer read, retried when
        another writer appended first, so the inbox holds each submitted turn once whatever the
        backend."""
        inbox = cls.__new__(cls)
        inbox._attach(streams)
        return inbox

    def _attach(self, streams: SessionStreams) -> None:
        self.tenant_id = _valid(streams.tenant, "tenant id")
        self.session_id = _valid(streams.thread, "session id")
        self.path = streams.path(INBOX)
        """The inbox's name in messages (on the `files` store: its file)."""
        self.streams = streams

    def _append(self, kind: str, turn_id: str, **payload: Any) -> None:
        self._append_if(kind, turn_id, payload)

    def _append_if(self, kind: str, turn_id: str, payload: dict[str, Any]) -> None:
        """Append to the store's stream at the end just read (a submission of a turn the inbox
        already holds is refused, decided on that same state); read again when another writer
        appended first."""
        while True:
            seen = self.streams.scan(INBOX)
            if kind == "submitted" and any(
                r.get("kind") == "submitted" and r.get("turn_id") == turn_id for r in _decoded(seen)
            ):
                raise ConfigError(f"turn id {turn_id} was used before: give each turn a new id (or none)")
            frame = encode_record({"kind": kind, "turn_id": turn_id, "ts": time.time(), **payload})
            if self.streams.append_if(INBOX, [frame], seen.size) is not None:
                return

    def records(self) -> list[dict[str, Any]]:
        """Every record, oldest first, read by `checkpointing.records` (its torn-tail rule).

        A reader never changes the stream: an incomplete last line (a writer that crashed
        mid-append) is skipped here and cut by the next append; any other damaged line, the last
        one included, raises `CorruptRecordError` naming the file and line.
        """
        return _decoded(self.streams.scan(INBOX))

    def turns(self) -> list[Turn]:
        """Every turn in submission order, each with the state its records give."""
        by_id: dict[str, Turn] = {}
        for rec in self.records():
            tid = str(rec.get("turn_id"))
            kind = rec.get("kind")
            if kind == "submitted":
                by_id[tid] = Turn(
                    tid,
                    self.tenant_id,
                    self.session_id,
                    str(rec["text"]),
                    rec.get("user_id"),
                    float(rec["ts"]),
                    new_session=bool(rec.get("new_session")),
                )
                by_id[tid].live = bool(rec.get("live"))
                by_id[tid].resume = bool(rec.get("resume"))
                if rec.get("decision") is not None:
                    by_id[tid].decision = dict(rec["decision"])
                continue
            turn = by_id.get(tid)
            if turn is not None:
                _fold(turn, str(kind), rec)
        return list(by_id.values())

    def turn(self, turn_id: str) -> Turn:
        """One turn; `ConfigError` when the session has no such turn."""
        for t in self.turns():
            if t.turn_id == turn_id:
                return t
        raise ConfigError(
            f"session {self.session_id} has no turn {turn_id}; check the turn id `agentrt submit` printed"
        )

    def next_open(self) -> Turn | None:
        """The first turn in submission order that is not finished (it may be paused)."""
        return next((t for t in self.turns() if not t.finished), None)

    def submit(
        self, text: str, turn_id: str, user_id: str | None, live: bool = False, new_session: bool = False
    ) -> None:
        """Append a new turn (the caller reserved `turn_id` in the tenant's turn index first);
        `new_session`: the turn's run creates the session."""
        if not text or not text.strip():
            raise ConfigError('empty input: give the agent something to do, e.g. agentrt submit --session ID "..."')
        extra: dict[str, Any] = {"new_session": True} if new_session else {}
        if live:
            extra["live"] = True
        self._append("submitted", turn_id, text=text, user_id=user_id, **extra)

    def submit_resume(
        self, turn_id: str, user_id: str | None, decision: dict[str, Any] | None, live: bool = False
    ) -> None:
        """Append a continuation: the worker resumes the session's unfinished run (with `decision`)."""
        extra: dict[str, Any] = {"live": True} if live else {}
        self._append("submitted", turn_id, text="", user_id=user_id, resume=True, decision=decision, **extra)

    def mark_started(self, turn_id: str, baseline_run_id: str | None, worker: str) -> None:
        """A worker is about to run (or resume) the turn."""
        self._append("started", turn_id, baseline_run_id=baseline_run_id, worker=worker)

    def mark_paused(self, turn_id: str, result: dict[str, Any], worker: str) -> None:
        """The turn's run stopped for a human approval."""
        self._append("paused", turn_id, result=result, worker=worker)

    def add_decision(self, turn_id: str, decision: dict[str, Any], live: bool = False) -> None:
        """The human's answer to the paused turn; a worker applies it on its next pass."""
        self._append("decision", turn_id, decision=decision, **({"live": True} if live else {}))

    def mark_done(self, turn_id: str, result: dict[str, Any], worker: str) -> None:
        """The turn's run ended; `result["status"]` is COMPLETED or FAILED."""
        self._append("done", turn_id, result=result, worker=worker)


def _decoded(seen: Scan) -> list[dict[str, Any]]:
    return [orjson.loads(body) for _, body in seen.records]


def _fold(turn: Turn, kind: str, rec: dict[str, Any]) -> None:
    if kind == "started":
        turn.attempts += 1
        if turn.attempts == 1:  # later starts are resumes of the run the first one created
            turn.baseline_run_id = str(rec.get("baseline_run_id") or "")
        turn.status = TurnStatus.RUNNING
    elif kind == "paused":
        turn.status, turn.result, turn.decision = TurnStatus.PAUSED, dict(rec.get("result") or {}), None
    elif kind == "decision":
        turn.status, turn.decision = TurnStatus.PENDING, dict(rec.get("decision") or {})
        turn.live = turn.live or bool(rec.get("live"))
    elif kind == "done":
        turn.result = dict(rec.get("result") or {})
        failed = turn.result.get("status") == TurnStatus.FAILED.value
        turn.status = TurnStatus.FAILED if failed else TurnStatus.COMPLETED
    turn.result = {**turn.result, "worker": rec.get("worker", turn.result.get("worker"))}


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


def _valid(value: str, what: str) -> str:
    try:
        return validate_id(value, what)
    except InvalidIdError as err:
        raise ConfigError(str(err)) from None
