"""LangGraph's `SqliteStore` as `agent.session.item_store` opens it: set up once, expired items swept
before each read (`omit_expired` is PostgreSQL's only)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from langgraph.store.base import GetOp, ListNamespacesOp, Op, Result, SearchOp, TTLConfig
from langgraph.store.sqlite import SqliteStore

from agent.errors import BackendUnavailable


class SweptSqliteStore(SqliteStore):
    """`SqliteStore` that deletes expired items before a read, as `omit_expired` does on PostgreSQL.

    The sweep is one indexed `DELETE` (only rows with an expiry are looked at), in its own transaction.
    """

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """LangGraph's batch, after a sweep when any op reads."""
        ops = list(ops)
        if any(isinstance(op, GetOp | SearchOp | ListNamespacesOp) for op in ops):
            self.sweep_ttl()
        return super().batch(ops)


def open_sqlite(path: Path, ttl: TTLConfig) -> SweptSqliteStore:
    """The store in file `path`, set up (its migrations run under a file lock beside it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit, one connection shared by threads: SqliteStore serializes them with its lock.
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        store = SweptSqliteStore(conn, ttl=ttl)
        # Two processes meeting a fresh file at once would both run the first migration.
        fd = os.open(f"{path}.migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            store.setup()
        finally:
            os.close(fd)
    except (OSError, sqlite3.Error) as err:
        raise BackendUnavailable(f"LangGraph's store {path} cannot be opened ({type(err).__name__}: {err})") from err
    return store
