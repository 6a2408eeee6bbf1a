"""The tool execution journal: no tool call runs twice across crashes.

`journal.jsonl` in the session directory, framed by `checkpointing.records` (checksum per line,
torn tail cut). Entries are keyed by (run_id, tool_call_id):

    INTENT     {kind: "intent", run_id, tool_call_id, tool_name, args_digest, effect, ts,
                room?: {path, before, after, result}}
               durable before the tool is called; `room` is the call's `RoomEffect`, when declared
    COMPLETED  {kind: "completed", run_id, tool_call_id, result | result_item | result_ref, result_digest, ts,
                room_manifest? | room_manifest_ref?}
    FAILED     {kind: "failed", run_id, tool_call_id, error, ts}

A result long enough to be an item of the checkpoint log is stored there (`result_item`, through the
`ResultTexts` the runtime gives: the saver's `put_text`), where the tool's writes reference the same
copy: a tool result is on disk once. `room_manifest` is the sandbox room as the call left it (room
path -> blob digest, the files in the blob store; a manifest over `inline_max_bytes` is itself a
blob, `room_manifest_ref`): written in the same record as the result, so a resume that finds the
room older than the journal (another machine, a lost room folder) makes it what the call left
instead of running the call again. One whose item never reached the disk (a machine crash
between the two files' syncs) counts as a COMPLETED record lost: the call is INTENT_ONLY again.

`agent.tools.execute.execute_with_journal` applies the resume policy to a call (a COMPLETED call is
replayed, never run again).

Where the lines live is the store's (`checkpointing.store`, stream `JOURNAL` of a `SessionStreams`):
`ToolExecutionJournal(base_dir, tenant, session, ...)` is the journal on the `files` store of
`base_dir`, byte for byte the `journal.jsonl` it always was; `ToolExecutionJournal.over(streams,
blobs, ...)` the journal of any store's session (PostgreSQL: rows of stream `@journal`, durable at
commit). A write carries the lease token, checked by the store with the append (a stale one raises
`StaleFencingTokenError`, nothing written). Reads verify every line: a damaged one (or row) raises
`CorruptRecordError` naming the stream; only a file can have a torn tail, which reads skip.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from agent.core.errors import BackendUnavailable
from agent.core.faults import crash_point
from agent.core.tool_spec import RoomEffect, digest_text
from agent.tools.journal_records import (
    RERUNNABLE,
    CallIndex,
    JournalAnomaly,
    JournalStatus,
    ResultTexts,
    anomalies,
    args_digest,
    index_record,
)
from checkpointing.blobs import BLOB_KEY, Blobs, BlobStore, is_blob_ref
from checkpointing.fencing import FencingGuard
from checkpointing.ids import validate_id
from checkpointing.layout import session_dir
from checkpointing.records import FsyncPolicy, encode_record
from checkpointing.store.base import JOURNAL, SessionStreams
from checkpointing.store.files import FileSessionStreams

JOURNAL_VERSION = 1
log = logging.getLogger(__name__)
DEFAULT_INLINE_MAX_BYTES = 16 * 1024


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
    room_manifest: dict[str, str] | None = None  # COMPLETED: the sandbox room right after the call


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ToolExecutionJournal:
    """The journal of one session (see the module docstring).

    `ToolExecutionJournal(base_dir, tenant, session, ...)` is the journal on the `files` store of
    `base_dir` (outside any commit group): appends durable per `fsync`, fenced with `token` when
    `fencing` (the session folder's guard) is given. `over` opens it on any store's session,
    whose commits it then shares (`SessionStreams.hold` / `commit`).
    """

    def __init__(
        self,
        base_dir: Path | str,
        tenant: str,
        session: str,
        fsync: FsyncPolicy = "always",
        fencing: FencingGuard | None = None,
        token: int | None = None,
        blobs: Blobs | None = None,
        inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
        texts: ResultTexts | None = None,
    ) -> None:
        directory = session_dir(base_dir, tenant, session)
        streams = FileSessionStreams(directory, tenant, session, fsync, None, fence=fencing)
        self._attach(streams, blobs if blobs is not None else BlobStore(base_dir), fsync, inline_max_bytes, texts)
        self.fencing = fencing
        self.token = token
        # Without the folder's guard the journal was never fenced: the token is not checked.
        self._fenced = fencing is not None

    @classmethod
    def over(
        cls,
        streams: SessionStreams,
        blobs: Blobs,
        *,
        token: int | None = None,
        fsync: FsyncPolicy | None = None,
        inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
        texts: ResultTexts | None = None,
    ) -> ToolExecutionJournal:
        """The journal of session `streams` (of any store: `Store.session(tenant, session, fsync)`),
        long results in `blobs` (the store's: `Store.blobs`); writes carry lease token `token`
        (None: no lease), durable per `fsync` (None: the streams')."""
        validate_id(streams.tenant, "tenant id")
        validate_id(streams.thread, "session id")
        journal = cls.__new__(cls)
        journal._attach(streams, blobs, fsync, inline_max_bytes, texts)
        journal.fencing = None
        journal.token = token
        journal._fenced = True
        return journal

    def _attach(
        self,
        streams: SessionStreams,
        blobs: Blobs,
        fsync: FsyncPolicy | None,
        inline_max_bytes: int,
        texts: ResultTexts | None,
    ) -> None:
        self.streams = streams
        """Where the journal's lines are (its stream `JOURNAL`)."""
        self.path = streams.path(JOURNAL)
        """The journal's name in messages (on the `files` store: its file)."""
        self.tenant = streams.tenant
        self.session = streams.thread
        self.blobs = blobs
        self.inline_max_bytes = inline_max_bytes
        self.texts = texts
        # Both stores keep their policy on the streams.
        own: FsyncPolicy = getattr(streams, "fsync", "always")
        self._policy: FsyncPolicy = fsync or own
        self._lock = threading.RLock()
        self._index: CallIndex | None = None

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

    def record_completed(
        self,
        run_id: str,
        tool_call_id: str,
        result: str,
        blobs: Blobs | None = None,
        room_manifest: dict[str, str] | None = None,
    ) -> None:
        """Record the result (one over `inline_max_bytes` goes to the blob store as a reference) and,
        for a call that may have changed the sandbox room, the room as it left it."""
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
        if room_manifest is not None:
            encoded = orjson.dumps(room_manifest, option=orjson.OPT_SORT_KEYS)
            if len(encoded) > self.inline_max_bytes:
                rec["room_manifest_ref"] = (blobs or self.blobs).ref_obj(encoded)
            else:
                rec["room_manifest"] = room_manifest
        self._append(rec)

    def record_failed(self, run_id: str, tool_call_id: str, error: str) -> None:
        """Record that the tool raised; `error` is what the model is told."""
        self._append({"kind": "failed", "run_id": run_id, "tool_call_id": tool_call_id, "error": error})

    def _append(self, rec: dict[str, Any]) -> None:
        rec["v"] = JOURNAL_VERSION
        rec["ts"] = _now()
        token = self.token if self._fenced else None
        with self._lock:
            index = self._load()
            crash_point("before_journal_append")
            _, _, durable = self.streams.append(JOURNAL, [encode_record(rec)], self._policy, token)
            if durable is not None:
                durable()
            unsafe = rec["kind"] == "intent" and rec["effect"] not in RERUNNABLE
            if unsafe and (self._policy == "batch" or self.streams.held):
                # An unsafe tool's INTENT must be durable before it runs, even in batch mode or a
                # held session; a read-only or idempotent one may simply run again if it is lost.
                # In a held session the store's commit makes the checkpoint data written so far
                # (the step that asked for this call) durable first: a crash can then never lose
                # the call's request while keeping its INTENT, so a resume cannot ask the model
                # again and run the same effect under a new call id.
                self.streams.commit(JOURNAL)
            crash_point("after_journal_append")
            index_record(index, rec)

    def sync(self) -> None:
        """Make every append so far durable (for `fsync="batch"`)."""
        self.streams.sync(JOURNAL)

    @property
    def _log(self) -> ToolExecutionJournal:
        """The journal itself, for callers of its former `RecordLog` (`_log.sync()`)."""
        return self

    # -- reading ---------------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """Every journal record in stream order (a file's torn tail skipped)."""
        with self._lock:
            return self._read()

    def _read(self) -> list[dict[str, Any]]:
        return [orjson.loads(body) for _, body in self.streams.scan(JOURNAL).records]

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
                manifest = self._manifest_of(end)
                return JournalEntryState(JournalStatus.COMPLETED, result=result, room_manifest=manifest, **base)
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
        with self._lock:
            index = dict(self._load())
        return anomalies(index)

    def _manifest_of(self, end: dict[str, Any]) -> dict[str, str] | None:
        """The room manifest a COMPLETED record carries (inline or as a blob), or None."""
        ref = end.get("room_manifest_ref")
        if isinstance(ref, dict) and is_blob_ref(ref):
            manifest = orjson.loads(self.blobs.get(ref[BLOB_KEY]))
        else:
            manifest = end.get("room_manifest")
        if manifest is None:
            return None
        if not isinstance(manifest, dict):
            raise BackendUnavailable(
                f"{self.path}: the room manifest of tool call {end.get('tool_call_id')} is not a mapping; "
                "the journal is damaged: run agentrt doctor on the session"
            )
        return manifest

    def _result_of(self, end: dict[str, Any]) -> str | None:
        ref = end.get("result_ref")
        item = end.get("result_item")
        if isinstance(item, dict):
            if self.texts is None:
                raise BackendUnavailable(
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
            raise BackendUnavailable(
                f"{self.path}: the recorded result of tool call {end.get('tool_call_id')} does not match "
                "its digest; restore the journal or blob volume from a backup"
            )
        return text

    def _load(self) -> CallIndex:
        if self._index is None:
            index: CallIndex = {}
            for rec in self._read():
                index_record(index, rec)
            self._index = index
        return self._index


__all__ = [
    "DEFAULT_INLINE_MAX_BYTES",
    "RERUNNABLE",
    "JournalAnomaly",
    "JournalEntryState",
    "JournalStatus",
    "ResultTexts",
    "ToolExecutionJournal",
    "args_digest",
    "digest_text",
]
