"""ChatSessionManager: one session API over L1 memory, L2 Redis, L3 SQL and the JSONL layer (DESIGN §5).

| mode       | read order                          | durable layers written on save           |
|------------|-------------------------------------|------------------------------------------|
| MIRROR     | L1 -> L2 -> SQL (JSONL if SQL down) | SQL (source of truth) + JSONL mirror     |
| PRIMARY    | L1 -> L2 -> JSONL -> SQL            | JSONL (source of truth) + SQL projection |
| JSONL_ONLY | L1 -> L2 -> JSONL                   | JSONL                                    |

A read that hits a lower layer fills the layers above it that missed. Every value is checked
against the caller's tenant (and user when given) before it is returned: another tenant's session
reads as `SessionNotFound`. A layer that fails is marked down with one warning per outage and
skipped until `retry_interval_s` has passed; a save still succeeds while one durable layer of the
mode took it, and fails with `BackendUnavailable` when none did. What a down layer missed is kept and
written to it (before anything is read from it) once it answers again. `last_read_trace` records
the layers the calling thread's last read touched, in order, with what each answered ("hit",
"miss", "down", "corrupt"; "newer" when MIRROR preferred a newer JSONL mirror over the SQL row;
"rebuilt" when no layer held it and it was rebuilt from events.jsonl; "owed" when a Redis copy was
skipped because the outbox still owes it a write).

A damaged copy is never replaced silently by another layer's: a damaged cache copy (L2) is skipped
with a warning, the source of truth is read. A damaged `session.json` read as the answer (PRIMARY,
JSONL_ONLY, or MIRROR while SQL is down) raises `SessionDocumentCorrupt` naming the file and
`agentrt doctor`; in MIRROR, where SQL is the truth, a damaged JSONL mirror leaves the SQL copy as
the answer and logs a warning naming the file (the doctor's `session_found` check reports it too).

Convergence after outages and crashes: every write a SQL or Redis layer misses is also recorded
in the session's durable outbox (`outbox.py`: stream `@outbox` of the record store; on the
PostgreSQL store no debt is lost with a machine's base_dir) before the caller goes on, and replayed, in order
and idempotently, from the source of truth when the layer answers again: by this process when it
next uses the layer (after `retry_interval_s`), by its background retrier (every
`retry_interval_s` while it owes anything, `retrier.py`), once more when a run ends (`mark_run`),
or by any process that next reads the session (a read replays what is owed before it reads the
layer; a Redis copy still owed is never read). A save deletes the Redis copy
before it writes the durable layers, so a process killed between the two leaves no stale copy
behind; and each turn start checks (one COUNT) that SQL holds every page row of the event log.

The reads across the layers (find, list, page, search) are `session_reads.SessionReads`; the
outage bookkeeping `layers.LayerKeeper`; a session's events are recorded through `memory`
(`chat_memory.ChatMemory`) on the session's event log, which `jsonl.event_log` hands out.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from agent.core.errors import (
    BackendUnavailable,
    ConfigError,
    SessionExists,
    SessionNotActive,
    SessionNotFound,
    quote_id,
)
from agent.core.statuses import RunStatus
from agent.session.chat_memory import ChatMemory
from agent.session.layers import Down as _Down
from agent.session.layers import Health as _Health
from agent.session.layers import Key
from agent.session.lifecycle import SessionAction, transition
from agent.session.outbox import Owed, SessionOutbox, StoreOutbox
from agent.session.retrier import Retrier
from agent.session.session import ChatSession, PageMessage, SessionStatus, SessionStore
from agent.session.session_reads import SessionReads
from agent.session.stores.jsonl import JsonlSessionStore
from agent.session.stores.memory_cache import MemorySessionStore
from checkpointing.records import FsyncPolicy
from checkpointing.store.base import Store

if TYPE_CHECKING:  # SQLAlchemy and redis load only when a layer of theirs is opened
    from agent.session.stores.sql import SqlSessionStore

_T = TypeVar("_T")
log = logging.getLogger("agentrt.sessions")
Mode = Literal["MIRROR", "PRIMARY", "JSONL_ONLY"]
MODES: tuple[str, ...] = ("MIRROR", "PRIMARY", "JSONL_ONLY")


class ChatSessionManager(SessionReads):
    """Create, read, save, list, end and expire sessions across the layers of one persistence mode."""

    def __init__(
        self,
        mode: Mode,
        l1: MemorySessionStore,
        l2: SessionStore | None = None,
        sql: SqlSessionStore | None = None,
        jsonl: JsonlSessionStore | None = None,
        retry_interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        default_max_loops: int | None = None,
        default_expire_minutes: float | None = None,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"unknown persistence mode {mode!r}; use one of {', '.join(MODES)}")
        if jsonl is None:
            raise ConfigError("every persistence mode needs the JSONL layer (base_dir): set base_dir")
        if mode == "MIRROR" and sql is None:
            raise ConfigError("persistence mode MIRROR needs a SQL database: set the database url")
        self.mode: Mode = mode
        self.l1 = l1
        self.l2 = l2
        self.sql = sql if mode != "JSONL_ONLY" else None
        self.jsonl = jsonl
        self.outbox: SessionOutbox = StoreOutbox(jsonl.records, "never" if jsonl.fsync == "never" else "always")
        self._owed: set[tuple[Key, str, Owed, int | None]] = set()
        """Session versions whose missed write this process already recorded (one record per save)."""
        self._debtors: set[Key] = set()
        """Sessions this process recorded debts for that it has not seen paid (the retrier's work)."""
        self._retrier = Retrier(lambda: bool(self.converge()), retry_interval_s)
        self.memory = ChatMemory(
            jsonl,
            self.sql,
            sql_usable=lambda: not self._health["SQL"].down,
            on_sql_missed=lambda s: self._owe_durably(s.key(), "SQL", Owed.MESSAGES),
        )
        self.retry_interval_s = retry_interval_s
        self._clock = clock
        self.defaults: dict[str, Any] = {}
        """Field defaults of new sessions (from the config's `session` section)."""
        if default_max_loops is not None:
            self.defaults["max_loops"] = default_max_loops
        if default_expire_minutes is not None:
            self.defaults["expire_minutes"] = default_expire_minutes
        caches: list[SessionStore] = [l1] + ([l2] if l2 is not None else [])
        durable: list[SessionStore]
        if mode == "MIRROR":
            assert self.sql is not None
            durable = [self.sql, jsonl]
        elif mode == "PRIMARY":
            durable = [jsonl] + ([self.sql] if self.sql is not None else [])
        else:
            durable = [jsonl]
        self.durable_layers = durable
        self.read_order = caches + durable
        """Layers in read order. In MIRROR the trailing JSONL is read only while SQL is down."""
        self._health: dict[str, _Health] = {layer.name: _Health() for layer in self.read_order}
        self._lock = threading.RLock()
        """Guards the outage bookkeeping; storage calls of different sessions run concurrently."""
        self._local = threading.local()

    # -- reads (the rest: `SessionReads`) -----------------------------------------------------

    def get(self, tenant_id: str, session_id: str, user_id: str | None = None) -> ChatSession:
        """The session as this tenant (and user) may see it; `SessionNotFound` otherwise.

        An ACTIVE session found expired is moved to EXPIRED and saved.
        """
        self._check_ids(tenant_id, session_id)
        session = self._find(tenant_id, session_id, user_id)
        if session is None:
            raise SessionNotFound(
                f"session {session_id} not found for tenant {tenant_id}"
                + (f" and user {user_id}" if user_id is not None else "")
                + f" (layers read: {' -> '.join(f'{n}:{r}' for n, r in self.last_read_trace)}); "
                "check the id, the tenant/user, and `agentrt sessions`"
            )
        if session.refresh_status():
            trace = self.last_read_trace
            try:
                self.save(session)
            except BackendUnavailable as err:
                log.warning("session %s is expired but the new status was not saved: %s", session_id, err)
            self.last_read_trace = trace
        return session

    def exists(self, tenant_id: str, session_id: str, user_id: str | None = None) -> bool:
        """Whether the session is visible to this tenant (and user)."""
        try:
            self.get(tenant_id, session_id, user_id)
        except SessionNotFound:
            return False
        return True

    # -- writes -------------------------------------------------------------------------------

    def save(self, session: ChatSession) -> ChatSession:
        """Write the session through every layer of the mode (durable ones first); bumps `version`."""
        self._check_ids(session.tenant_id, session.session_id)
        try:
            session.to_json()
        except ValueError as err:
            raise ConfigError(f"session {session.session_id} cannot be saved: {err}; keep context JSON-only") from err
        session.version += 1
        stored = session.model_copy(deep=True)
        self._invalidate_cache(session.key(), session.version)
        wrote: builtins.list[str] = []
        missed: builtins.list[SessionStore] = []
        for layer in self.durable_layers:
            try:
                self._use(layer, partial(layer.put, stored))
                wrote.append(layer.name)
            except _Down:
                missed.append(layer)
        if not wrote:
            session.version -= 1
            raise BackendUnavailable(
                f"session {session.session_id} was not saved: no durable layer of mode {self.mode} "
                f"is reachable ({', '.join(x.name for x in self.durable_layers)}); "
                "fix the storage and retry"
            )
        for layer in missed:
            self._owe(layer, stored)
        for layer in self.read_order[: len(self.read_order) - len(self.durable_layers)]:
            self._fill(layer, stored)
        return session

    def create(
        self,
        tenant_id: str,
        agent_id: str,
        user_id: str,
        session_id: str | None = None,
        *,
        config_digest: str | None = None,
        save: bool = True,
        **fields: Any,
    ) -> ChatSession:
        """Create a new ACTIVE session: the event-log header first, then the session in every layer.

        `fields` are other `ChatSession` fields (room_id, max_loops, expire_minutes, context, ...).
        `save=False` writes only the (durable) header and leaves the first save to the caller (a
        turn start saves once, with the turn counted and the run marked); until then the session
        reads as rebuilt from its header, which is what a crash in between would leave anyway.
        """
        session_id = session_id or str(uuid.uuid4())
        self._check_ids(tenant_id, session_id)
        fields = {**self.defaults, **fields}
        try:
            session = ChatSession(
                session_id=session_id, agent_id=agent_id, tenant_id=tenant_id, user_id=user_id, **fields
            )
        except ValueError as err:
            raise ConfigError(f"cannot create session {session_id}: {err}") from err
        taken = SessionExists(
            f"session {quote_id(session_id)} already exists for tenant {quote_id(tenant_id)}; pick another id"
        )
        if self._find(tenant_id, session_id, None) is not None:
            raise taken
        try:
            # The folder fsync is shared with the first save's (same folder; the caller's with save=False).
            self.jsonl.create_log(session, config_digest, sync_dir=False)
        except FileExistsError as err:
            raise taken from err
        return self.save(session) if save else session

    def apply(self, tenant_id: str, session_id: str, action: SessionAction, user_id: str | None = None) -> ChatSession:
        """Read the session, apply a lifecycle action (the table in `lifecycle.py`) and save it."""
        session = self.get(tenant_id, session_id, user_id)
        transition(session, action)
        return self.save(session)

    def end(self, tenant_id: str, session_id: str, user_id: str | None = None) -> ChatSession:
        """Mark the session ENDED (no new input, no resume; only a fork goes on)."""
        return self.apply(tenant_id, session_id, SessionAction.END, user_id)

    def expire(self, tenant_id: str, session_id: str, user_id: str | None = None) -> ChatSession:
        """Mark the session EXPIRED now."""
        return self.apply(tenant_id, session_id, SessionAction.EXPIRE, user_id)

    def pause(self, tenant_id: str, session_id: str, user_id: str | None = None) -> ChatSession:
        """Mark the session PAUSED (a plain new turn is refused until it is resumed)."""
        return self.apply(tenant_id, session_id, SessionAction.PAUSE, user_id)

    def reactivate(self, session: ChatSession) -> ChatSession:
        """The resume path: a PAUSED session becomes ACTIVE again; saves it."""
        transition(session, SessionAction.RESUME)
        return self.save(session)

    def start_turn(self, session: ChatSession, now: datetime | None = None, run_id: str | None = None) -> ChatSession:
        """Check that a new user turn may run, count it and save (raises `SessionNotActive`).

        With `run_id` the same save also records that run as RUNNING (one save per turn start).
        """
        try:
            session.check_can_start_turn(now)
        except SessionNotActive:
            if session.status is SessionStatus.EXPIRED:
                self.save(session)
            raise
        transition(session, SessionAction.TURN)
        session.loop_count += 1
        session.touch(now)
        if run_id is not None:
            transition(session, run_id=run_id, run_status=RunStatus.RUNNING)
        self._check_page_rows(session)
        return self.save(session)

    def mark_run(self, session: ChatSession, run_id: str, run_status: RunStatus | str) -> ChatSession:
        """Record the newest run's id and status (the run table of `lifecycle.py`); saves it.

        A run that ends (any status but RUNNING) then tries once more, whatever the retry
        interval, to replay what a layer missed during it (`converge`)."""
        transition(session, run_id=run_id, run_status=run_status)
        saved = self.save(session)
        if str(run_status) != RunStatus.RUNNING and self.outbox.owes(*session.key()):
            self.converge([session.key()])
        return saved

    # -- events and branches ------------------------------------------------------------------

    def fork(
        self,
        session: ChatSession,
        from_entry_id: str,
        reason: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Start a new branch at `from_entry_id` (see `ChatMemory.fork`), save, return the branch id."""
        branch_id = self.memory.fork(session, from_entry_id, reason, extra=extra)
        self.save(session)
        return branch_id

    def history(self, session: ChatSession, limit: int | None = None) -> builtins.list[PageMessage]:
        """The page history of the session's current branch (see `ChatMemory.history`)."""
        return self.memory.history(session, limit)


def open_manager(
    mode: Mode,
    base_dir: Path | str,
    *,
    redis_url: str | None = None,
    database_url: str | None = None,
    redis_key_prefix: str = "agentrt",
    create_tables: bool | None = None,
    config_hint: str = "",
    inline_payload_max_bytes: int = 8192,
    fsync: FsyncPolicy = "always",
    l1_max_entries: int = 1024,
    l1_ttl_seconds: float = 300.0,
    record_store: Store | None = None,
    lazy_sql: bool = False,
    **manager_options: Any,
) -> ChatSessionManager:
    """Build the layers from URLs (what the runner does from its config) and return the manager.

    `database_url` None means the embedded SQLite file `base_dir/agentrt.db`; it is ignored in
    JSONL_ONLY. The schema migrations are applied when `create_tables` is true, and by default only
    for SQLite (created or upgraded on first use). A server database must already be at the newest
    schema (`agentrt db upgrade`): a missing or older one raises `SchemaOutdated` naming the command
    (with `config_hint` appended, e.g. " --config prod.yaml") before anything else happens. A server
    that does not answer is not refused here: that is an outage, which the manager rides out.
    `record_store`: the PostgreSQL record store the JSONL layer's records live in (None: the files
    under `base_dir`). `lazy_sql` (for one-shot readers): the embedded SQLite layer is opened on first
    use, and a read it would answer with a miss is answered without loading SQLAlchemy
    (`LazySqlSessionStore`); a PostgreSQL one is checked and read with psycopg until another call
    needs SQLAlchemy (`LazyPgSessionStore`).
    """
    from agent.session.stores.sql_lazy import LazySqlSessionStore, sqlite_url
    from agent.session.stores.sql_lazy_pg import LazyPgSessionStore

    sql: SqlSessionStore | None = None
    if mode != "JSONL_ONLY":
        url = database_url or sqlite_url(base_dir)
        create = url.startswith("sqlite") if create_tables is None else create_tables
        if lazy_sql and create and LazySqlSessionStore.embedded(url):
            sql = cast("SqlSessionStore", LazySqlSessionStore(url))
        elif lazy_sql and not create and LazyPgSessionStore.server(url):
            sql = cast("SqlSessionStore", LazyPgSessionStore(url))
        else:
            from agent.session.stores.sql import SqlSessionStore

            sql = SqlSessionStore(url, create=create)
        if not create:
            try:
                sql.check_schema(config_hint)
            except BackendUnavailable as err:
                log.warning("SQL schema not checked, the database does not answer: %s", err)
    l2: SessionStore | None = None
    if redis_url:
        from agent.session.stores.redis import RedisSessionStore

        l2 = RedisSessionStore(redis_url, key_prefix=redis_key_prefix)
    return ChatSessionManager(
        mode,
        MemorySessionStore(max_entries=l1_max_entries, ttl_seconds=l1_ttl_seconds),
        l2,
        sql,
        JsonlSessionStore(base_dir, inline_payload_max_bytes=inline_payload_max_bytes, fsync=fsync, store=record_store),
        **manager_options,
    )
