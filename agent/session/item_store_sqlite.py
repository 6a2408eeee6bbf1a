"""LangGraph's `SqliteStore` as `agent.session.item_store` opens it: set up once, expired items swept
before each read (`omit_expired` is PostgreSQL's only), and with a semantic index wherever Python runs.

The index needs sqlite-vec's distance functions in the connection. LangGraph loads them as an SQLite
extension, which a Python whose `sqlite3` was built without extension loading (pyenv's default build)
cannot do; there the same three functions are registered in Python instead (slower on a large store,
the same answers).
"""

from __future__ import annotations

import fcntl
import math
import os
import sqlite3
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from langgraph.store.base import GetOp, ListNamespacesOp, Op, Result, SearchOp, TTLConfig
from langgraph.store.sqlite import SqliteStore

from agent.core.errors import BackendUnavailable

CAN_LOAD_EXTENSIONS = hasattr(sqlite3.Connection, "enable_load_extension")
"""Whether this Python's `sqlite3` can load sqlite-vec as an extension."""


class SweptSqliteStore(SqliteStore):
    """`SqliteStore` that deletes expired items before a read, as `omit_expired` does on PostgreSQL.

    The sweep is one indexed `DELETE` (only rows with an expiry are looked at), in its own transaction.
    A search by `query` asks LangGraph for `offset + limit` items from the first and cuts here:
    LangGraph ranks only twice `limit` candidates, so its own offset past them answers nothing.
    """

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """LangGraph's batch, after a sweep when any op reads."""
        ops = list(ops)
        if any(isinstance(op, GetOp | SearchOp | ListNamespacesOp) for op in ops):
            self.sweep_ttl()
        ranked = [isinstance(op, SearchOp) and bool(op.query) and bool(self.index_config) for op in ops]
        asked = [
            op._replace(limit=op.offset + op.limit, offset=0) if by_query and isinstance(op, SearchOp) else op
            for op, by_query in zip(ops, ranked, strict=True)
        ]
        answers = super().batch(asked)
        return [
            answer[op.offset :] if by_query and isinstance(op, SearchOp) and isinstance(answer, list) else answer
            for op, by_query, answer in zip(ops, ranked, answers, strict=True)
        ]


class VecConnection(sqlite3.Connection):
    """A connection LangGraph can load sqlite-vec into: the extension itself where this Python can
    load extensions, else sqlite-vec's distance functions written in Python."""

    def enable_load_extension(self, enabled: bool, /) -> None:
        """Allow extension loading (nothing to allow where this Python cannot load any)."""
        if CAN_LOAD_EXTENSIONS:
            super().enable_load_extension(enabled)

    def load_extension(self, name: str, /) -> None:
        """Load the extension `name`; sqlite-vec without extension loading: its functions in Python."""
        if CAN_LOAD_EXTENSIONS:
            super().load_extension(name)
            return
        import sqlite_vec

        if os.path.realpath(name) != os.path.realpath(sqlite_vec.loadable_path()):
            raise sqlite3.OperationalError(f"this Python's sqlite3 cannot load the extension {name}")
        for fn_name, fn in (
            ("vec_distance_cosine", cosine_distance),
            ("vec_distance_L2", l2_distance),
            ("vec_distance_L1", l1_distance),
        ):
            self.create_function(fn_name, 2, fn, deterministic=True)


def _vectors(a: bytes, b: bytes) -> tuple[array[float], array[float]]:
    """Two float32 vectors as sqlite-vec serializes them, of one length."""
    va, vb = array("f", a), array("f", b)
    if len(va) != len(vb):
        raise ValueError(f"vectors of different lengths ({len(va)} and {len(vb)})")
    return va, vb


def cosine_distance(a: bytes, b: bytes) -> float | None:
    """sqlite-vec's `vec_distance_cosine`: 1 - cos(a, b) (null for a zero vector)."""
    va, vb = _vectors(a, b)
    norms = math.sqrt(sum(x * x for x in va)) * math.sqrt(sum(y * y for y in vb))
    return None if norms == 0 else 1.0 - sum(x * y for x, y in zip(va, vb, strict=True)) / norms


def l2_distance(a: bytes, b: bytes) -> float:
    """sqlite-vec's `vec_distance_L2`: the Euclidean distance."""
    va, vb = _vectors(a, b)
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb, strict=True)))


def l1_distance(a: bytes, b: bytes) -> float:
    """sqlite-vec's `vec_distance_L1`: the sum of absolute differences."""
    va, vb = _vectors(a, b)
    return sum(abs(x - y) for x, y in zip(va, vb, strict=True))


def open_sqlite(path: Path, ttl: TTLConfig, index: dict[str, Any] | None = None) -> SweptSqliteStore:
    """The store in file `path`, set up (its migrations run under a file lock beside it), with the
    semantic `index` (`agent.session.item_index`) when given."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit, one connection shared by threads: SqliteStore serializes them with its lock.
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, factory=VecConnection)
        store = SweptSqliteStore(conn, ttl=ttl, index=index)  # type: ignore[arg-type]
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
