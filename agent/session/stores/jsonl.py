"""The JSONL layer: a session's business state next to its event log, under `base_dir`.

Choice (documented for operators): the session document is a small file
`tenants/<tenant>/sessions/<session>/session.json` holding one framed record (canonical JSON +
checksum, `checkpointing.records`), rewritten atomically (temp + fsync + rename) on every save.
The history itself is `events.jsonl` beside it (header + append-only entry tree). When
`session.json` is missing but the header exists (a crash before the first save, a lost file),
`rebuild` makes the session from the log alone (identity from the header, branch/leaf from the
newest entry, page messages, turns and the last run status from the entries); the manager calls
it only when no layer of the mode holds the session. A saved leaf that lags behind the log
(events appended after the last save) is moved forward to the log's branch leaf: the log is the
truth. `delete` removes only `session.json`; the event log is never deleted here.

`event_log` hands out each session's event log (`checkpointing.entry_log.EventLog`), opened once
per process: the handle `ChatMemory` records through (`append`, then `commit`, which asks the
record store for durability per `fsync`), and every reader's view of the session's history.

Listing goes by the index of sessions (`base_dir/sessions.index.sqlite`, see `stores/listing.py`):
`create_log` and `put` write the session's row right after its header / document, in one tiny
transaction; a failure to write the row is logged, never the caller's failure (the row is a cache:
a later listing corrects a stale row, and `agentrt doctor --repair` rebuilds a lost one).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.core.errors import BackendUnavailable, LifecycleError
from agent.core.events import SESSION_EVENTS
from agent.core.statuses import RunStatus
from agent.session.lifecycle import SessionAction, transition
from agent.session.session import ChatSession, PageMessage, SessionDocumentCorrupt
from agent.session.stores.document import delete_session, load_session, save_session
from checkpointing.blobs import Blobs
from checkpointing.entry_log import EventLog
from checkpointing.exceptions import CheckpointingError
from checkpointing.fsyncs import fsync_dir
from checkpointing.layout import is_id, session_dir, session_file, session_index_file, sessions_root, tenant_ids
from checkpointing.records import FsyncPolicy, decode_file
from checkpointing.session_index import SessionIndex, SessionRow
from checkpointing.store.base import SessionStreams, Store
from checkpointing.store.file_store import FileStore

logger = logging.getLogger("agentrt.sessions")
PAGE_TYPES = {"user_turn": "user", "assistant_message": "assistant"}
PAGE_ENTRY_TYPES = frozenset(PAGE_TYPES)
RUN_STATUS = {
    "run_start": RunStatus.RUNNING,
    "run_resume": RunStatus.RUNNING,
    "run_pause": RunStatus.PAUSED,
    "run_end": RunStatus.COMPLETED,
    "run_fail": RunStatus.FAILED,
    "recovery_blocked": RunStatus.RECOVERY_BLOCKED,
}


def _lifecycle_action(record: dict[str, Any]) -> SessionAction | None:
    """The session action an event-log entry records, if any."""
    kind, payload = record["type"], record.get("payload") or {}
    if kind == "run_pause":
        return SessionAction.PAUSE
    if kind == "run_resume":
        return SessionAction.RESUME
    if kind == "run_end" and payload.get("session_ended"):
        return SessionAction.END
    if kind == "branch_created":
        return SessionAction.FORK
    return None


def page_messages(events: EventLog, leaf_id: str | None) -> list[PageMessage]:
    """The page history of the branch ending at `leaf_id`: its user_turn/assistant_message entries."""
    out = []
    for e in events.projection(leaf_id, PAGE_ENTRY_TYPES):
        role = PAGE_TYPES.get(e.type)
        if role is not None:
            out.append(PageMessage(role=role, content=str(e.payload.get("content", "")), entry_id=e.id, ts=_ts(e.ts)))
    return out


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def read_session_file(path: Path) -> ChatSession | None:
    """The session document in `path` (a `session.json`), None when the file is missing.

    The file is only ever written whole (`atomic_write`, fsynced), so it is read with
    `records.decode_file`: an empty or zeroed file is damage like any other. A damaged file raises
    `CheckpointingError` (`CorruptRecordError` naming the file when the record does not verify).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return ChatSession.from_json(decode_file(path, data))
    except CheckpointingError:
        raise
    except ValueError as err:
        raise CheckpointingError(f"{path}: not a valid session document ({err})") from err


class JsonlSessionStore:
    """Sessions as `session.json` beside `events.jsonl`; also the owner of the open event logs
    (`event_log`: each session's handle for recording, opened once per process)."""

    name = "JSONL"

    def __init__(
        self,
        base_dir: Path | str,
        inline_payload_max_bytes: int = 8192,
        fsync: FsyncPolicy = "always",
        max_open_logs: int = 256,
        store: Store | None = None,
    ) -> None:
        self.base_dir = Path(base_dir)
        self.inline_payload_max_bytes = inline_payload_max_bytes
        self.fsync: FsyncPolicy = fsync
        self.store = store
        """The PostgreSQL record store (`persistence.store: postgres`); None: the files under base_dir."""
        self.records: Store = store if store is not None else FileStore(self.base_dir)
        """Where the sessions' records and documents are, whichever the backend."""
        self.blobs: Blobs = self.records.blobs
        self.max_open_logs = max_open_logs
        self._logs: OrderedDict[tuple[str, str], EventLog] = OrderedDict()
        self._lock = threading.Lock()
        from agent.session.stores.listing import EXPIRY

        self.index = SessionIndex(session_index_file(self.base_dir), expiry=EXPIRY, empty=self._alone)
        """The index of sessions for listing (a cache of the session documents)."""

    def _alone(self, key: tuple[str, str]) -> bool:
        """Whether no session folder other than `key`'s exists (asked once, when the index file is made)."""
        for tenant in tenant_ids(self.base_dir):
            try:
                names = sessions_root(self.base_dir, tenant).iterdir()
                if any(p.is_dir() and is_id(p.name) and (tenant, p.name) != key for p in names):
                    return False
            except FileNotFoundError:
                continue
        return True

    def index_put(self, row: SessionRow) -> None:
        """Write one session's index row; a failure is logged (the row is a cache), never raised.
        On the PostgreSQL store the session table is the index: nothing is written here."""
        if self.store is not None:
            return
        try:
            self.index.upsert(row)
        except Exception as err:  # sqlite3 / OSError: a listing or `agentrt doctor --repair` mends it
            logger.warning(
                "session %s: its row in the session index %s was not written (%s); "
                "`agentrt doctor --repair` rebuilds the index",
                row.session_id,
                self.index.path,
                err,
            )

    def index_session(self, session: ChatSession) -> None:
        """Write the index row of `session` (after its header or document was written)."""
        from agent.session.stores.listing import index_row

        try:
            row = index_row(session, self.event_log(session.tenant_id, session.session_id))
        except (CheckpointingError, OSError) as err:  # a damaged log: the doctor reports it
            logger.warning("session %s: index row not written (%s)", session.session_id, err)
            return
        self.index_put(row)

    def forget(self, tenant_id: str, session_id: str) -> None:
        """Drop a session's open event log and its index row (its folder was removed for good)."""
        with self._lock:
            self._logs.pop((tenant_id, session_id), None)
        if self.store is not None:
            return
        try:
            self.index.remove(tenant_id, session_id)
        except Exception as err:  # sqlite3 / OSError: the next rebuild drops the row
            logger.warning("session %s: its index row was not removed (%s)", session_id, err)

    # -- event logs ---------------------------------------------------------------------------

    def event_log(self, tenant_id: str, session_id: str) -> EventLog:
        """The session's event log: its handle for recording (`append`, `commit`) and reading,
        opened once per process (the newest `max_open_logs` stay open, indexed)."""
        key = (tenant_id, session_id)
        with self._lock:
            log = self._logs.get(key)
            if log is None:
                # Appends are written at once; `commit` makes them durable per the store's policy
                # (the store's `commit`: while a run holds the session, with the step's checkpoint).
                log = EventLog.over(
                    self.records.session(tenant_id, session_id, "batch"),
                    self.blobs,
                    inline_payload_max_bytes=self.inline_payload_max_bytes,
                    fsync="batch",
                    schema=SESSION_EVENTS,
                    commits=self.fsync,
                )
                self._logs[key] = log
                while len(self._logs) > self.max_open_logs:
                    self._logs.popitem(last=False)
            self._logs.move_to_end(key)
            return log

    def create_log(
        self, session: ChatSession, config_digest: str | None = None, sync_dir: bool = True
    ) -> dict[str, Any]:
        """Write the header of a new session's event log (durable with `fsync: always`).

        `sync_dir=False`: the caller's next step is a `put` of the session, whose rename fsyncs
        the same folder, which makes the new file's name durable too (one folder fsync for both).
        A crash before that leaves no `session.json` and maybe no log: the session was never
        started, and nobody was told it was.
        """
        log = self.event_log(session.tenant_id, session.session_id)
        try:
            header = log.create(
                {
                    "tenant_id": session.tenant_id,
                    "agent_id": session.agent_id,
                    "user_id": session.user_id,
                    "session_id": session.session_id,
                    "created_at": session.created_at.isoformat(),
                    "config_digest": config_digest,
                }
            )
            if self.fsync == "always":
                log.sync()
                if sync_dir and self.store is None:
                    fsync_dir(log.path.parent)
        except OSError as err:
            raise BackendUnavailable(f"cannot write {log.path} ({err}); check that base_dir is writable") from err
        self.index_session(session)
        return header

    # -- the store protocol -------------------------------------------------------------------

    def path(self, tenant_id: str, session_id: str) -> Path:
        """The session.json of one session (in messages: the store's name for it)."""
        return self._docs(tenant_id, session_id)[1]

    def _docs(self, tenant_id: str, session_id: str) -> tuple[SessionStreams, Path]:
        """The store session holding the session document, and the document's name in messages."""
        streams = self.records.session(tenant_id, session_id, self.fsync)
        if self.store is not None:
            return streams, streams.path("session.json")
        return streams, session_file(session_dir(self.base_dir, tenant_id, session_id))

    def get(self, tenant_id: str, session_id: str) -> ChatSession | None:
        """The session from session.json (leaf moved forward to the log's), or None."""
        streams, path = self._docs(tenant_id, session_id)
        with self._errors(session_id, path):
            session = load_session(streams)
            if session is None:
                return None
            log = self.event_log(tenant_id, session_id)
            if log.exists():
                leaf = log.branch_leaf(session.current_branch_id)
                if leaf is not None and leaf != session.current_leaf_entry_id:
                    session.current_leaf_entry_id = leaf
                    session.messages = page_messages(log, leaf)
        if session.tenant_id != tenant_id or session.session_id != session_id:
            return None
        return session

    @contextmanager
    def _errors(self, session_id: str, path: Path) -> Iterator[None]:
        try:
            yield
        except CheckpointingError as err:
            raise SessionDocumentCorrupt(
                f"session {session_id} under {path.parent} is damaged ({err}); run `agentrt doctor` on it"
            ) from err
        except OSError as err:
            raise BackendUnavailable(f"cannot read session {session_id} under {path.parent} ({err})") from err

    def rebuild(self, tenant_id: str, session_id: str) -> ChatSession | None:
        """The last resort when no layer holds the session: rebuild it from events.jsonl alone.

        Identity from the header; branch and leaf from the newest entry; page history from that
        branch; loop_count from the user turns; run id/status (PAUSED pauses) from the newest run event.
        """
        log = self.event_log(tenant_id, session_id)
        with self._errors(session_id, log.path):
            header = log.header()
            if header is None or header.get("tenant_id") != tenant_id:
                return None
            records = log.raw_entries()
            session = ChatSession(
                session_id=session_id,
                agent_id=header.get("agent_id") or "",
                tenant_id=tenant_id,
                user_id=header.get("user_id") or "",
                created_at=_ts(header["created_at"]),
                loop_count=sum(1 for r in records if r["type"] == "user_turn"),
            )
            if records:
                session.current_branch_id = records[-1]["branch_id"]
                session.current_leaf_entry_id = records[-1]["id"]
                session.messages = page_messages(log, records[-1]["id"])
            for record in records:  # the session status: its lifecycle entries replayed through the table
                action = _lifecycle_action(record)
                if action is not None:
                    with contextlib.suppress(LifecycleError):  # a log from before the table: keep what holds
                        transition(session, action)
            runs = [r for r in records if r["type"] in RUN_STATUS]
            if runs:  # the newest run as recorded (restored, not a transition)
                last = runs[-1]
                interrupted = last["type"] == "run_fail" and (last.get("payload") or {}).get("interrupted")
                session.last_run_status = RunStatus.INTERRUPTED if interrupted else RUN_STATUS[last["type"]]
                run_id = runs[-1].get("payload", {}).get("run_id")
                session.last_run_id = run_id if isinstance(run_id, str) else None
            return session

    def put(self, session: ChatSession) -> None:
        """Rewrite session.json atomically (writing the log header first if the log is missing)."""
        streams, path = self._docs(session.tenant_id, session.session_id)
        if not self.event_log(session.tenant_id, session.session_id).exists():
            # A session refilled from SQL must be able to take new events (the folder is fsynced below).
            self.create_log(session, sync_dir=False)
        try:
            save_session(streams, session)
        except OSError as err:
            raise BackendUnavailable(f"cannot write {path} ({err}); check that base_dir is writable") from err
        self.index_session(session)

    def delete(self, tenant_id: str, session_id: str) -> None:
        """Remove session.json. The event log stays (history is append-only), so `get` still rebuilds
        the session from it; to remove a session for good, remove its folder."""
        try:
            delete_session(self.records.session(tenant_id, session_id, self.fsync))
        except OSError as err:
            raise BackendUnavailable(f"cannot delete session {session_id} ({err})") from err

    def list(self, tenant_id: str, user_id: str | None = None) -> builtins.list[ChatSession]:
        """Every session of the tenant under base_dir (only `user_id`'s when given), oldest first."""
        root = sessions_root(self.base_dir, tenant_id)
        out: builtins.list[ChatSession] = []
        try:
            if self.store is not None and hasattr(self.store, "logged"):
                names = self.store.logged(tenant_id)
            else:
                names = sorted(p.name for p in root.iterdir() if p.is_dir())
        except FileNotFoundError:
            return out
        except OSError as err:
            raise BackendUnavailable(f"cannot list {root} ({err})") from err
        for name in names:
            try:
                session = self.get(tenant_id, name) or self.rebuild(tenant_id, name)
            except (ValueError, CheckpointingError):
                continue  # a folder whose name is not a valid id is not a session
            except BackendUnavailable as err:
                logger.warning("session %s skipped in the listing: %s", name, err)
                continue
            if session is not None and (user_id is None or session.user_id == user_id):
                out.append(session)
        return sorted(out, key=lambda s: (s.created_at, s.session_id))
