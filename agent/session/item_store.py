"""LangGraph's store (`BaseStore`: items in namespaces, kept across threads) on the settings' backend.

With `persistence.store: files` (the embedded default) it is LangGraph's `SqliteStore` in
`base_dir/langgraph-store.sqlite`; with `store: postgres` LangGraph's `PostgresStore` in the database
`store_url` names (its `store` and `store_migrations` tables, in the URL's schema). Nothing of the
stores is ours: `setup()` (their migrations) runs once per process when the store is first opened,
under a lock two processes starting together both respect, and TTLs are their own TTL config.

`PostgresStore` leaves out expired items when it reads (`omit_expired`); `SqliteStore` keeps them
until a sweep deletes them, so the SQLite store here sweeps before each read, and an expired item is
never answered on either backend. `start_sweeper` also deletes expired items every
`SWEEP_MINUTES`, so the ones nobody reads go too.

With `store.index` in the settings both stores keep a semantic index (`agent.session.item_index`):
SQLite in its `store_vectors` table (sqlite-vec's functions), PostgreSQL with the pgvector extension,
which the database must offer (a `ConfigError` says so when it does not).

One store per location per process, shared by every caller (the server's routes, the graphs of its
runs); `close_item_stores` releases them. Callers see a tenant's part only (`agent.session.tenant_store`).
"""

from __future__ import annotations

import threading
from typing import Any

from langgraph.store.base import BaseStore, TTLConfig

from agent.core.config import AgentSettings
from agent.core.errors import BackendUnavailable, ConfigError
from agent.session.item_index import index_config
from checkpointing.layout import langgraph_store_file

SWEEP_MINUTES = 5
"""How often a server deletes expired items (LangGraph's default interval)."""
TTL_CONFIG: TTLConfig = {"refresh_on_read": True, "omit_expired": True, "sweep_interval_minutes": SWEEP_MINUTES}
"""Reads refresh an item's TTL unless they say otherwise (LangGraph's default); expired items are never read."""
SETUP_LOCK = 0x6C67_7374_6F72_6531  # "lgstore1": the advisory lock `PostgresStore.setup` runs under

_STORES: dict[str, BaseStore] = {}
_LOCK = threading.Lock()


def item_store(settings: AgentSettings) -> BaseStore:
    """The store of `settings` (opened and set up on first use in this process, then shared).

    Raises `BackendUnavailable` when its database cannot be opened.
    """
    url = settings.store_url()
    where = url or str(langgraph_store_file(settings.base_dir))
    with _LOCK:
        store = _STORES.get(where)
        if store is None:
            index = index_config(settings)
            store = _STORES[where] = _open_postgres(url, index) if url else _open_sqlite(settings, index)
    return store


def start_sweeper(store: BaseStore) -> None:
    """Delete expired items every `SWEEP_MINUTES` in a daemon thread (the store's own sweeper)."""
    start = getattr(store, "start_ttl_sweeper", None)
    if start is not None:
        start()


def stop_sweeper(store: BaseStore) -> None:
    """Stop the sweeper `start_sweeper` started (a no-op when none runs)."""
    stop = getattr(store, "stop_ttl_sweeper", None)
    if stop is not None:
        stop(timeout=5)


def close_item_stores() -> None:
    """Stop the sweepers and close every store this process opened (the next use opens them again)."""
    with _LOCK:
        stores = list(_STORES.values())
        _STORES.clear()
    for store in stores:
        stop_sweeper(store)
        conn: Any = getattr(store, "conn", None)
        if conn is not None:
            conn.close()


def _open_sqlite(settings: AgentSettings, index: dict[str, Any] | None) -> BaseStore:
    from agent.session.item_store_sqlite import open_sqlite  # sqlite-vec loads in ~0.2 s: only when needed

    return open_sqlite(langgraph_store_file(settings.base_dir), TTL_CONFIG, index)


def _open_postgres(url: str, index: dict[str, Any] | None) -> BaseStore:
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from agent.session.lease_postgres import libpq_url
    from agent.session.record_store import db_where

    dsn = libpq_url(url)
    try:  # one plain connection first: a pool would retry (and log) for as long as it is open
        with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))
            # No prepared statements: the store works behind PgBouncer's transaction pooling too.
            kwargs = {"autocommit": True, "prepare_threshold": None, "row_factory": dict_row}
            pool: ConnectionPool[Any] = ConnectionPool(
                dsn, min_size=1, max_size=4, kwargs=kwargs, name="langgraph-store", open=True
            )
            store = PostgresStore(pool, index=index, ttl=TTL_CONFIG)  # type: ignore[arg-type]
            try:
                store.setup()
            except BaseException:
                pool.close()
                raise
            conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
    except psycopg.Error as err:
        if index is not None and 'extension "vector"' in str(err):
            raise ConfigError(
                f"store.index on PostgreSQL needs the pgvector extension, which {db_where(url)} does not offer "
                f"({str(err).splitlines()[0]}); install pgvector on that server, or remove store.index"
            ) from None
        raise BackendUnavailable(
            f"LangGraph's store in {db_where(url)} cannot be opened ({type(err).__name__}); check that PostgreSQL "
            "runs and persistence.store_url"
        ) from None
    return store
