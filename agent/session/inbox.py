"""A session's inbox: the turns submitted to it, in submission order, and what became of each.

The inbox is session stream `INBOX` of the session in the record store (on `files` the session
folder's `inbox.jsonl`; on PostgreSQL its rows). It holds framed records (checkpointing's record
framing: canonical JSON + checksum, torn-tail rule), each appended with `append_if` the end its
writer read (retried when another writer appended first), so submitters and workers on several
machines never interleave:

    submitted  {turn_id, text, user_id}        the turn exists (durable before it is enqueued);
               + live: true                    its worker publishes live events (agent/runner/live.py)
               + resume: true, decision        a continuation: resume the session's unfinished
                                               run (with the human's decision), no new text
               + options {before, after,       its run's breakpoints, and whether it may start over
                 discard_unfinished}           the run it interrupted (`agentrt serve`)
    started    {turn_id, baseline_run_id}      a worker is about to run it; the session's last run
                                               id before, so a crash tells "not yet run" from "ran"
    paused     {turn_id, run_id}               its run waits for a human approval
    decision   {turn_id, decision[, live, options]}  the human answered; the turn is pending again
    done       {turn_id, status, run_id, ...}  its run ended (COMPLETED or FAILED)

A turn's status is its last record's: the worker that holds the session's drain lease takes the
first turn that is not finished, in submission order. `turns/<turn_id>.json` under the tenant
maps a turn id to its session (one framed record, created exclusively: a turn id is used once per
tenant).

The turn index (agent/session/turn_index.py) is the store's reservations (`Store.reserve`: on
`files` the same `turns/<turn>.json` files; on PostgreSQL rows).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from agent.core.errors import ConfigError, SessionNotFound
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id
from checkpointing.records import Scan, encode_record
from checkpointing.store.base import INBOX, SessionStreams
from checkpointing.store.file_store import FileStore

SEALED, UNSEALED = "sealed", "unsealed"
"""The kinds of the records that close an inbox about to be carried into a renewed session, and
open it again when the renewal does not happen."""


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
    live: bool = False  # its worker publishes live events for `agentrt serve` (agent/runner/live.py)
    resume: bool = False  # continues the session's unfinished run instead of starting one with `text`
    new_session: bool = False  # submitted with --new-session: its run creates the session
    options: dict[str, Any] | None = None  # {"before", "after", "discard_unfinished"}: agent.runner.options

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

    def _append_if(
        self, kind: str, turn_id: str, payload: dict[str, Any], exists: Callable[[], bool] | None = None
    ) -> None:
        """Append to the store's stream at the end just read (a submission of a turn the inbox
        already holds is refused, decided on that same state); read again when another writer
        appended first. `exists`: asked when the inbox is empty (a session removed since the
        caller checked it leaves none; one made again gets its old records first)."""
        while True:
            seen = self.streams.scan(INBOX)
            if not seen.records and exists is not None and not exists():
                raise SessionNotFound(f"no session {self.session_id}; `agentrt sessions` lists yours")
            if _sealed(seen):
                raise SessionNotFound(
                    f"session {self.session_id} is being made again (its first turn was rolled back); "
                    "submit again in a moment"
                )
            if kind == "submitted" and any(
                r.get("kind") == "submitted" and r.get("turn_id") == turn_id for r in _decoded(seen)
            ):
                raise ConfigError(f"turn id {turn_id} was used before: give each turn a new id (or none)")
            frame = encode_record({"kind": kind, "turn_id": turn_id, "ts": time.time(), **payload})
            if self.streams.append_if(INBOX, [frame], seen.size) is not None:
                return

    def seal(self, for_s: float) -> list[dict[str, Any]]:
        """Close the inbox to every other writer for `for_s` seconds (the holder's lease time: a
        seal whose writer died lapses with its lease) and return its records, seals left out. A
        session about to be removed and made again carries these into its new inbox, so a turn
        submitted meanwhile is refused (`SessionNotFound`: submit again) instead of appended to
        an inbox that is about to go. `unseal` opens it again when the renewal fails."""
        while True:
            seen = self.streams.scan(INBOX)
            records = [r for r in _decoded(seen) if r.get("kind") not in (SEALED, UNSEALED)]
            now = time.time()
            frame = encode_record({"kind": SEALED, "turn_id": "", "ts": now, "until": now + for_s})
            if self.streams.append_if(INBOX, [frame], seen.size) is not None:
                return records

    def sealed(self) -> bool:
        """Whether a seal in force closes the inbox (its session is being made again)."""
        return _sealed(self.streams.scan(INBOX))

    def unseal(self) -> None:
        """Open a sealed inbox again (its session was not renewed after all)."""
        while True:
            seen = self.streams.scan(INBOX)
            if not _sealed(seen):
                return
            frame = encode_record({"kind": UNSEALED, "turn_id": "", "ts": time.time()})
            if self.streams.append_if(INBOX, [frame], seen.size) is not None:
                return

    def carry(self, records: list[dict[str, Any]]) -> None:
        """Append `records` (another inbox's, as `records()` read them) as they were, in their order,
        after whatever this inbox holds: a renewed session keeps its queued turns."""
        if not records:
            return
        frames = [encode_record(r) for r in records]
        while self.streams.append_if(INBOX, frames, self.streams.scan(INBOX).size) is None:
            pass

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
                by_id[tid].options = rec.get("options")
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
        self,
        text: str,
        turn_id: str,
        user_id: str | None,
        live: bool = False,
        new_session: bool = False,
        options: dict[str, Any] | None = None,
        exists: Callable[[], bool] | None = None,
    ) -> None:
        """Append a new turn (the caller reserved `turn_id` in the tenant's turn index first);
        `new_session`: the turn's run creates the session; `options`: its `RunOptions` as a dict;
        `exists`: whether the session is there, asked when the inbox is found empty."""
        if not text or not text.strip():
            raise ConfigError('empty input: give the agent something to do, e.g. agentrt submit --session ID "..."')
        extra: dict[str, Any] = {"new_session": True} if new_session else {}
        if live:
            extra["live"] = True
        if options:
            extra["options"] = options
        self._append_if("submitted", turn_id, {"text": text, "user_id": user_id, **extra}, exists)

    def submit_resume(
        self,
        turn_id: str,
        user_id: str | None,
        decision: dict[str, Any] | None,
        live: bool = False,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Append a continuation: the worker resumes the session's unfinished run (with `decision`)."""
        extra: dict[str, Any] = {"live": True} if live else {}
        if options:
            extra["options"] = options
        self._append("submitted", turn_id, text="", user_id=user_id, resume=True, decision=decision, **extra)

    def mark_started(self, turn_id: str, baseline_run_id: str | None, worker: str) -> None:
        """A worker is about to run (or resume) the turn."""
        self._append("started", turn_id, baseline_run_id=baseline_run_id, worker=worker)

    def mark_paused(self, turn_id: str, result: dict[str, Any], worker: str) -> None:
        """The turn's run stopped for a human approval."""
        self._append("paused", turn_id, result=result, worker=worker)

    def add_decision(
        self, turn_id: str, decision: dict[str, Any], live: bool = False, options: dict[str, Any] | None = None
    ) -> None:
        """The human's answer to the paused turn; a worker applies it on its next pass (with `options`)."""
        extra: dict[str, Any] = {"live": True} if live else {}
        if options:
            extra["options"] = options
        self._append("decision", turn_id, decision=decision, **extra)

    def mark_done(self, turn_id: str, result: dict[str, Any], worker: str) -> None:
        """The turn's run ended; `result["status"]` is COMPLETED or FAILED."""
        self._append("done", turn_id, result=result, worker=worker)


def _sealed(seen: Scan) -> bool:
    """Whether the inbox's last record is a seal still in force (while it is, only its writer
    appends: an unseal, or nothing before the inbox is removed)."""
    if not seen.records:
        return False
    last = orjson.loads(seen.records[-1][1])
    return bool(last.get("kind") == SEALED and time.time() < float(last.get("until") or 0))


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
        turn.options = rec.get("options")
    elif kind == "done":
        turn.result = dict(rec.get("result") or {})
        failed = turn.result.get("status") == TurnStatus.FAILED.value
        turn.status = TurnStatus.FAILED if failed else TurnStatus.COMPLETED
    turn.result = {**turn.result, "worker": rec.get("worker", turn.result.get("worker"))}


def _valid(value: str, what: str) -> str:
    try:
        return validate_id(value, what)
    except InvalidIdError as err:
        raise ConfigError(str(err)) from None
