"""Where this agentrt's session records live: `persistence.store`, `files` or `postgres`.

With `files` (the embedded default) every caller keeps its folder under `base_dir` and nothing here
is opened. With `postgres` the event log, the checkpoints, the tool journal, the inbox, the turn
reservations, the session document and the blobs are rows of the database `store_url` names
(`checkpointing.store.PostgresStore`, its tables made by `agentrt db upgrade`), so `base_dir` holds
only what a machine may lose (caches, the sandbox rooms' working copies).

One `PostgresStore` (one connection pool) is opened per URL per process and shared by every
caller; `close_stores` releases them (tests, a worker's shutdown).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from checkpointing.blobs import Blobs
from checkpointing.records import FsyncPolicy
from checkpointing.store.base import SessionStreams, Store
from checkpointing.store.file_store import FileStore

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.session.inbox import Inbox
    from agent.session.turn_index import TurnIndex
    from checkpointing.entry_log import EventLog
    from checkpointing.store.postgres import PostgresStore

_STORES: dict[str, PostgresStore] = {}
_LOCK = threading.Lock()


def pg_store(settings: AgentSettings) -> PostgresStore | None:
    """The PostgreSQL record store of `settings` (shared in this process), None with `store: files`.

    Its schema is checked, never created here: a database without the store's tables raises
    `SchemaOutdated` naming `agentrt db upgrade`; an unreachable one `BackendUnavailable`
    naming the host (never the password).
    """
    url = settings.store_url()
    if url is None:
        return None
    with _LOCK:
        store = _STORES.get(url)
        if store is None:
            store = _STORES[url] = _open(url, _hint(settings))
    return store


def _hint(settings: AgentSettings) -> str:
    from agent.core.config import config_hint

    return config_hint(settings)


def _open(url: str, hint: str) -> PostgresStore:
    import psycopg

    from agent.core.errors import BackendUnavailable, SchemaOutdated
    from checkpointing.store.pg_schema import MIGRATIONS
    from checkpointing.store.postgres import PostgresStore

    where = db_where(url)
    try:  # one plain connection first: a pool would retry (and log) for as long as it is open
        with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
            # The store's tables are in the connection's schema (a URL's search_path, else public).
            schema = str((conn.execute("SELECT current_schema()").fetchone() or ("public",))[0])
            found = conn.execute("SELECT to_regclass('jsonl_store_migrations')").fetchone()
            ran = conn.execute("SELECT count(*) FROM jsonl_store_migrations").fetchone() if found and found[0] else (0,)
    except psycopg.OperationalError as err:
        if "does not exist" in str(err):
            raise SchemaOutdated(
                f"the record store's database {where} does not exist: run `agentrt db init{hint}` (it creates it)"
            ) from None
        raise BackendUnavailable(
            f"the record store {where} does not answer; start PostgreSQL or fix persistence.store_url"
        ) from None
    if ran is None or int(ran[0]) < len(MIGRATIONS):
        raise SchemaOutdated(f"the record store {where} has no or an older schema: run `agentrt db upgrade{hint}`")
    return PostgresStore(url, schema=schema)


def db_where(url: str) -> str:
    """host:port/db of `url`, never its password."""
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(url.replace("postgresql+psycopg://", "postgresql://", 1))
    return f"postgresql://{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def close_stores() -> None:
    """Close every record store this process opened (the next use opens them again)."""
    with _LOCK:
        stores = list(_STORES.values())
        _STORES.clear()
    for store in stores:
        store.close()


def store(settings: AgentSettings) -> Store:
    """The record store of `settings`: every client of a session (the saver, the event log, the
    tool journal, the inbox, the outbox, the fence) reads and writes through it, whichever the
    backend: the folders under `base_dir` (`FileStore`), or the PostgreSQL store (`pg_store`)."""
    pg = pg_store(settings)
    return pg if pg is not None else FileStore(settings.base_dir)


def blobs(settings: AgentSettings) -> Blobs:
    """The blobs of the record store: the store's table, or `base_dir/blobs`."""
    return store(settings).blobs


def session_streams(
    settings: AgentSettings, tenant_id: str, session_id: str, fsync: FsyncPolicy = "always"
) -> SessionStreams:
    """The store session of (tenant, session): its folder under `base_dir`, or its rows."""
    return store(settings).session(tenant_id, session_id, fsync)


def event_log(
    settings: AgentSettings, tenant_id: str, session_id: str, streams: SessionStreams | None = None
) -> EventLog:
    """The session's event log on the record store, to read (the manager keeps the logs it writes);
    `streams`: the session's streams to read it from instead (a copy of them)."""
    from agent.core.events import SESSION_EVENTS
    from checkpointing.entry_log import EventLog

    return EventLog.over(
        streams or session_streams(settings, tenant_id, session_id, "batch"),
        blobs(settings),
        inline_payload_max_bytes=settings.persistence.inline_payload_max_bytes,
        schema=SESSION_EVENTS,
    )


def inbox(settings: AgentSettings, tenant_id: str, session_id: str) -> Inbox:
    """The session's inbox on the record store."""
    from agent.session.inbox import Inbox

    return Inbox.over(session_streams(settings, tenant_id, session_id))


def turn_index(settings: AgentSettings, tenant_id: str) -> TurnIndex:
    """The tenant's turn reservations on the record store."""
    from agent.session.turn_index import TurnIndex

    return TurnIndex.over(store(settings), tenant_id)
