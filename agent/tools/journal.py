"""The tool execution journal: no tool call runs twice across crashes.

`journal.jsonl` in the session directory, framed by `checkpointing.records` (checksum per line,
torn tail cut). Entries are keyed by (run_id, tool_call_id):

    INTENT     {kind: "intent", run_id, tool_call_id, tool_name, args_digest, effect, ts,
                room?: {path, before, after, result}}
               durable before the tool is called; `room` is the call's `RoomEffect`, when declared
    COMPLETED  {kind: "completed", run_id, tool_call_id, result | result_item | result_ref, result_digest, ts}
    FAILED     {kind: "failed", run_id, tool_call_id, error, ts}

A result long enough to be an item of the checkpoint log is stored there (`result_item`, through the
`ResultTexts` the runtime gives: the saver's `put_text`), where the tool's writes reference the same
copy: a tool result is on disk once. One whose item never reached the disk (a machine crash
between the two files' syncs) counts as a COMPLETED record lost: the call is INTENT_ONLY again.

`agent.tools.execute.execute_with_journal` applies the resume policy to a call (a COMPLETED call is
replayed, never run again).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol

from agent.errors import StorageError
from agent.faults import crash_point
from agent.tools.base import RoomEffect
from checkpointing.blobs import BLOB_KEY, BlobStore, is_blob_ref
from checkpointing.fencing import FencingGuard
from checkpointing.layout import journal_file, session_dir
from checkpointing.records import TIER_STATE, CommitGroup, FsyncPolicy, RecordLog, canonical_json

JOURNAL_VERSION = 1
log = logging.getLogger(__name__)
DEFAULT_INLINE_MAX_BYTES = 16 * 1024


class ResultTexts(Protocol):
    """Where long results are kept: the checkpoint log of the run (see the module docstring)."""

    def put(self, run_id: str, text: str) -> dict[str, Any] | None:
        """Store `text`; its reference, or None when it is too short (kept inline)."""

    def get(self, run_id: str, ref: dict[str, Any]) -> str | None:
        """The text of `ref`, or None when it is not stored."""


class JournalStatus(StrEnum):
    """Where a tool call stands according to the journal."""

    NONE = "none"
    INTENT_ONLY = "intent_only"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(frozen=True)
class JournalEntryState:
    """The journal's view of one (run_id, tool_call_id)."""

    status: JournalStatus
    tool_name: str | None = None
    effect: str | None = None
    args_digest: str | None = None
    result: str | None = None  # COMPLETED: the recorded result text (blob loaded and verified)
    error: str | None = None  # FAILED: the recorded error text
    room: dict[str, Any] | None = None  # the INTENT's RoomEffect fields, when the tool declared one


@dataclass(frozen=True)
class JournalAnomaly:
    """Something `agentrt doctor` should show: a call run twice, or one whose outcome is unknown."""

    run_id: str
    tool_call_id: str
    kind: Literal["completed_twice", "intent_without_end", "end_without_intent"]
    detail: str


def digest_text(text: str) -> str:
    """`sha256:<hex>` of a text's UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def args_digest(args: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of tool arguments."""
    return "sha256:" + hashlib.sha256(canonical_json(args)).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class _Key:
    intents: int = 0
    completed: int = 0
    failed: int = 0
    last_kind: str = ""
    intent: dict[str, Any] | None = None
    ends: list[dict[str, Any]] = field(default_factory=list)
    """Every COMPLETED / FAILED record of the call, in file order (the first readable one counts)."""

    @property
    def end(self) -> dict[str, Any] | None:
        """The first end record (what the model saw the first time)."""
        return self.ends[0] if self.ends else None


RERUNNABLE = frozenset({"read_only", "idempotent"})
"""Effect classes a resume may run again when the journal has no record of the call."""


class ToolExecutionJournal:
    """The journal of one session. Writes carry the lease token checked by `fencing` (if given)."""

    def __init__(
        self,
        base_dir: Path | str,
        tenant: str,
        session: str,
        fsync: FsyncPolicy = "always",
        fencing: FencingGuard | None = None,
        token: int | None = None,
        blobs: BlobStore | None = None,
        inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
        group: CommitGroup | None = None,
        tier: int = TIER_STATE,
        texts: ResultTexts | None = None,
    ) -> None:
        self.path = journal_file(session_dir(base_dir, tenant, session))
        self.tenant = tenant
        self.session = session
        self.fencing = fencing
        self.token = token
        self.blobs = blobs if blobs is not None else BlobStore(base_dir)
        self.inline_max_bytes = inline_max_bytes
        self._log = RecordLog(self.path, fsync=fsync, group=group, tier=tier)
        self._lock = threading.RLock()
        self._index: dict[tuple[str, str], _Key] | None = None
        self.texts = texts

    # -- writing ---------------------------------------------------------------------------

    def record_intent(
        self, run_id: str, tool_call_id: str, tool_name: str, args: Any, effect: str, room: RoomEffect | None = None
    ) -> None:
        """Durably record that the tool is about to run (returns after the fsync), with the room
        effect it declared (see the module docstring)."""
        rec: dict[str, Any] = {
            "kind": "intent",
            "run_id": run_id,
            "tool_call_id": tool_call_id,
            "tool_name": tool_name,
            "args_digest": args_digest(args),
            "effect": effect,
        }
        if room is not None:
            rec["room"] = {"path": room.path, "before": room.before, "after": room.after, "result": room.result}
        self._append(rec)

    def record_completed(self, run_id: str, tool_call_id: str, result: str, blobs: BlobStore | None = None) -> None:
        """Record the result; one over `inline_max_bytes` goes to the blob store as a reference."""
        data = result.encode("utf-8")
        rec: dict[str, Any] = {
            "kind": "completed",
            "run_id": run_id,
            "tool_call_id": tool_call_id,
            "result_digest": digest_text(result),
        }
        item = self.texts.put(run_id, result) if self.texts is not None else None
        if item is not None:
            rec["result_item"] = item
        elif len(data) > self.inline_max_bytes:
            rec["result_ref"] = (blobs or self.blobs).ref_obj(data)
        else:
            rec["result"] = result
        self._append(rec)

    def record_failed(self, run_id: str, tool_call_id: str, error: str) -> None:
        """Record that the tool raised; `error` is what the model is told."""
        self._append({"kind": "failed", "run_id": run_id, "tool_call_id": tool_call_id, "error": error})

    def _append(self, rec: dict[str, Any]) -> None:
        rec["v"] = JOURNAL_VERSION
        rec["ts"] = _now()
        with self._lock:
            index = self._load()
            with self.fencing.fenced(self.token) if self.fencing is not None else nullcontext():
                crash_point("before_journal_append")
                self._log.append(rec)
                group = self._log.group
                deferred = group is not None and group.active
                unsafe = rec["kind"] == "intent" and rec["effect"] not in RERUNNABLE
                if unsafe and (self._log.fsync == "batch" or deferred):
                    # An unsafe tool's INTENT must be durable before it runs, even in batch mode or a
                    # held group; a read-only or idempotent one may simply run again if it is lost.
                    # In a held group the checkpoint data written so far (the step that asked for
                    # this call) is made durable first: a crash can then never lose the call's
                    # request while keeping its INTENT, so a resume cannot ask the model again and
                    # run the same effect under a new call id.
                    if group is not None and deferred:
                        group.barrier(TIER_STATE)
                    self._log.sync()
                crash_point("after_journal_append")
            self._apply(index, rec)

    # -- reading ---------------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """Every journal record in file order (torn tail cut off)."""
        with self._lock:
            return self._log.read()

    def reload(self) -> None:
        """Forget the in-memory index (another process wrote the file)."""
        with self._lock:
            self._index = None

    def lookup(self, run_id: str, tool_call_id: str) -> JournalEntryState:
        """The state of one call; a COMPLETED result is read back (and verified) from its blob."""
        with self._lock:
            key = self._load().get((run_id, tool_call_id))
        if key is None or (key.intent is None and key.end is None):
            return JournalEntryState(JournalStatus.NONE)
        intent = key.intent or {}
        base: dict[str, Any] = {
            "tool_name": intent.get("tool_name"),
            "effect": intent.get("effect"),
            "args_digest": intent.get("args_digest"),
            "room": intent.get("room") if isinstance(intent.get("room"), dict) else None,
        }
        # The first end whose result is on disk wins: it is what the model saw (a COMPLETED record
        # whose result item a machine crash lost is skipped, as if it were lost with it).
        for end in key.ends:
            if end["kind"] == "failed":
                return JournalEntryState(JournalStatus.FAILED, error=str(end.get("error", "")), **base)
            result = self._result_of(end)
            if result is not None:
                return JournalEntryState(JournalStatus.COMPLETED, result=result, **base)
        if key.ends:
            log.warning(
                "journal %s: the result of %s is not stored; the call counts as unfinished", self.path, tool_call_id
            )
        return JournalEntryState(JournalStatus.INTENT_ONLY, **base)

    def completed_count(self, run_id: str) -> int:
        """How many calls of `run_id` are COMPLETED (a resume replays these instead of running them)."""
        with self._lock:
            return sum(1 for (rid, _), k in self._load().items() if rid == run_id and k.completed)

    def duplicates(self) -> list[JournalAnomaly]:
        """Calls completed more than once, calls whose intent has no end, and ends with no intent."""
        out: list[JournalAnomaly] = []
        with self._lock:
            items = list(self._load().items())
        for (run_id, call_id), k in items:
            name = (k.intent or {}).get("tool_name")
            if k.completed > 1:
                detail = f"tool {name} has {k.completed} COMPLETED records: it ran more than once"
                out.append(JournalAnomaly(run_id, call_id, "completed_twice", detail))
            if k.last_kind == "intent":
                detail = f"tool {name} has an INTENT without an end: its outcome is unknown"
                out.append(JournalAnomaly(run_id, call_id, "intent_without_end", detail))
            if k.intents == 0:
                out.append(JournalAnomaly(run_id, call_id, "end_without_intent", "no INTENT record"))
        return out

    def _result_of(self, end: dict[str, Any]) -> str | None:
        ref = end.get("result_ref")
        item = end.get("result_item")
        if isinstance(item, dict):
            if self.texts is None:
                raise StorageError(
                    f"{self.path}: the result of tool call {end.get('tool_call_id')} is kept in the checkpoint "
                    "log; read the journal through the runtime that has the saver"
                )
            got = self.texts.get(str(end.get("run_id")), item)
            if got is None:
                return None
            text = got
        elif isinstance(ref, dict) and is_blob_ref(ref):
            text = self.blobs.get(ref[BLOB_KEY]).decode("utf-8")
        else:
            text = str(end.get("result", ""))
        if end.get("result_digest") not in (None, digest_text(text)):
            raise StorageError(
                f"{self.path}: the recorded result of tool call {end.get('tool_call_id')} does not match "
                "its digest; restore the journal or blob volume from a backup"
            )
        return text

    def _load(self) -> dict[tuple[str, str], _Key]:
        if self._index is None:
            index: dict[tuple[str, str], _Key] = {}
            for rec in self._log.read():
                self._apply(index, rec)
            self._index = index
        return self._index

    @staticmethod
    def _apply(index: dict[tuple[str, str], _Key], rec: dict[str, Any]) -> None:
        kind = rec.get("kind")
        if kind not in ("intent", "completed", "failed"):
            return  # a record kind from a newer writer: kept on disk, not interpreted
        key = index.setdefault((str(rec.get("run_id")), str(rec.get("tool_call_id"))), _Key())
        key.last_kind = str(kind)
        if kind == "intent":
            key.intents += 1
            key.intent = rec
            return
        if kind == "completed":
            key.completed += 1
        else:
            key.failed += 1
        key.ends.append(rec)
