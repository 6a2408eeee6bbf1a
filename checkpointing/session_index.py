"""An index of sessions for listing: one SQLite file, one row a session, kept beside the files.

    base_dir/sessions.index.sqlite   table `sessions`, key (tenant_id, session_id)

Listing sessions by walking every session folder costs O(sessions) file reads per page; this index
answers a page with one indexed query. It knows no runtime field: its caller gives each row's key
(tenant, session id) and attributes (user, status, created, last activity, expiry time, the
version of the session document the row was made from) and `meta`, a small JSON object of
searchable values (filtered with `json_extract`). Pages come newest activity first by default and
are continued by an opaque cursor (keyset paging: `(sort value, session id)` of the last row).

Choices (documented for operators):
- It is a cache, never the data: the session documents stay the source of truth, and `rebuild`
  makes the index again from one walk of them. Written with stdlib `sqlite3` in WAL mode with
  `synchronous=NORMAL` and a busy timeout; each change is one UPSERT in its own tiny transaction
  (no file rewritten, no process-wide lock), guarded by the document version, so an older
  document never replaces a newer row (a rebuild racing a live writer keeps the writer's row).
- The document and its row are two files, written document first. A crash between the two
  leaves a stale row (older version): the caller re-reads the documents of the rows of the page
  it returns (O(page), never O(sessions)), corrects the stale rows (`upsert`) and asks again. A
  session whose document exists but whose row was never written (a crash right after its first
  save) is missing from pages until `rebuild` (which the owner offers as a repair command).
- `expiry=(live, expired)`: a row of status `live` whose expiry time has passed reads as
  `expired` (computed at read, in the query: filters and the returned status agree).
- Every query binds the tenant: no call reads across tenants.
- A file that is not a SQLite database (garbage bytes, a torn copy) is never fatal to a write: it
  is moved aside to `<file>.broken` and a new, empty index is made and marked incomplete;
  `health()` then says "incomplete" (or "damaged" / "missing") and the owner rebuilds it.
- A new file made by a write is complete only when the caller's `empty(key)` says no other
  session existed (a fresh base_dir); otherwise it is marked incomplete until `rebuild`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from checkpointing._session_index_sql import (
    EVERY_ROW,
    SCHEMA_SQL,
    SELECT,
    UPSERT,
    BadCursor,
    MetaPath,
    Order,
    RowFilter,
    decode_cursor,
    encode_cursor,
    filters_sql,
    row_of,
    us,
)
from checkpointing.layout import broken_file
from checkpointing.session_rows import IndexHealth, IndexUnusable, SessionRow, instant

__all__ = [
    "EVERY_ROW",
    "BadCursor",
    "IndexHealth",
    "IndexUnusable",
    "MetaPath",
    "Order",
    "RowFilter",
    "SessionIndex",
    "SessionRow",
    "decode_cursor",
    "encode_cursor",
    "instant",
]

log = logging.getLogger(__name__)
SCHEMA = "1"
_COLUMNS = {"activity": "active_us", "created": "created_us", "session_id": "session_id", "status": "status"}
_BUSY_MS = 5000
_BATCH = 500


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class SessionIndex:
    """The session index in one SQLite file (see the module docstring)."""

    def __init__(
        self,
        path: Path | str,
        *,
        expiry: tuple[str, str] | None = None,
        empty: Callable[[tuple[str, str]], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.expiry = expiry
        self._empty = empty
        self._clock = clock
        self._local = threading.local()

    # -- connections --------------------------------------------------------------------------

    def _conn(self, create: bool) -> sqlite3.Connection:
        """This thread's connection (made on first use). `create` (a write): make the file and its
        tables when missing; a read never writes the schema (nor makes a missing file)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) != os.getpid():
            conn = self._local.conn = None  # inherited through fork: never used (nor closed) here
        file = _identity(self.path)
        if conn is None or file is None or file != getattr(self._local, "file", None):
            # None yet, or the file was removed or replaced (a rebuild set it aside) since it was opened.
            self._close()
            if file is None and not create:
                raise IndexUnusable(self.path, "missing")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=_BUSY_MS / 1000, isolation_level=None, check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error:
                conn.close()
                raise
            self._local.conn = conn
            self._local.pid = os.getpid()
            self._local.file = _identity(self.path)
            self._local.schema = False
        if create and not self._local.schema:
            self._schema(conn)
            self._local.schema = True
        return conn

    def _close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self._local.conn = None
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def close(self) -> None:
        """Close this thread's connection."""
        self._close()

    def _schema(self, conn: sqlite3.Connection) -> None:
        conn.executescript(SCHEMA_SQL)

    @contextlib.contextmanager
    def _tx(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _writable(self, key: tuple[str, str] | None) -> sqlite3.Connection:
        """A connection for a write: a missing file is made, a damaged one set aside and made again."""
        made = not self.path.exists()
        try:
            conn = self._conn(create=True)
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
                raise
            self._set_aside(str(err))
            made = True
            conn = self._conn(create=True)
        if made:
            complete = key is not None and self._empty is not None and self._empty(key)
            self._set_complete(conn, complete)
        return conn

    def _set_aside(self, why: str) -> None:
        self._close()
        kept = broken_file(self.path)
        log.warning("session index %s is damaged (%s): moved to %s; it will be rebuilt", self.path, why, kept.name)
        os.replace(self.path, kept)
        for suffix in ("-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _set_complete(self, conn: sqlite3.Connection, complete: bool) -> None:
        conn.execute("INSERT OR REPLACE INTO index_info VALUES ('complete', ?)", ("1" if complete else "0",))

    # -- writes -------------------------------------------------------------------------------

    def upsert(self, row: SessionRow) -> None:
        """Insert or update one row in one tiny transaction (never replacing a newer version)."""
        conn = self._writable((row.tenant_id, row.session_id))
        conn.execute(UPSERT, self._values(row))

    def _values(self, row: SessionRow) -> tuple[Any, ...]:
        return (
            row.tenant_id,
            row.session_id,
            row.user_id,
            row.status,
            us(row.created_at),
            us(row.last_activity),
            us(row.expires_at),
            row.version,
            json.dumps(dict(row.meta), separators=(",", ":"), ensure_ascii=False, default=str),
            int(self._clock() * 1_000_000),
        )

    def remove(self, tenant_id: str, session_id: str) -> None:
        """Forget one session (no error when absent or when there is no index)."""
        if not self.path.exists():
            return
        conn = self._writable(None)
        conn.execute("DELETE FROM sessions WHERE tenant_id = ? AND session_id = ?", (tenant_id, session_id))

    def rebuild(self, rows: Iterable[SessionRow]) -> int:
        """Make the index again from `rows` (every session, from one walk); returns how many.

        A damaged file is set aside first. Rows of sessions not in `rows` are removed unless a
        writer touched them since the rebuild began (a session made meanwhile keeps its row).
        """
        if self.path.exists():
            try:
                self._conn(create=False).execute("SELECT count(*) FROM sessions").fetchone()
            except sqlite3.DatabaseError as err:
                self._set_aside(str(err))
        conn = self._writable(None)
        start = int(self._clock() * 1_000_000)
        self._set_complete(conn, False)
        conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS seen "
            "(tenant_id TEXT, session_id TEXT, PRIMARY KEY (tenant_id, session_id))"
        )
        conn.execute("DELETE FROM seen")
        n = 0
        batch: list[SessionRow] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= _BATCH:
                n += self._put_batch(conn, batch)
                batch = []
        n += self._put_batch(conn, batch)
        with self._tx(conn):
            conn.execute(
                "DELETE FROM sessions WHERE touched_us < ? AND (tenant_id, session_id) NOT IN "
                "(SELECT tenant_id, session_id FROM seen)",
                (start,),
            )
            conn.execute("DELETE FROM seen")
            self._set_complete(conn, True)
        return n

    def _put_batch(self, conn: sqlite3.Connection, batch: Sequence[SessionRow]) -> int:
        if not batch:
            return 0
        with self._tx(conn):
            conn.executemany(UPSERT, [self._values(r) for r in batch])
            conn.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)", [(r.tenant_id, r.session_id) for r in batch])
        return len(batch)

    # -- reads --------------------------------------------------------------------------------

    def health(self, count: bool = True) -> IndexHealth:
        """The state of the file (read-only: a missing file is not made); `count`: also count the rows
        (a scan of the table; a listing that only needs the state passes False)."""
        if not self.path.exists():
            return IndexHealth("missing")
        try:
            conn = self._conn(create=False)
            complete = conn.execute("SELECT value FROM index_info WHERE key = 'complete'").fetchone()
            rows = int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0]) if count else 0
        except sqlite3.DatabaseError as err:
            self._close()
            return IndexHealth("damaged", detail=str(err))
        if complete is None or complete[0] != "1":
            return IndexHealth("incomplete", rows, "sessions made before it, or a rebuild cut short, have no row")
        return IndexHealth("ok", rows)

    def _reader(self) -> sqlite3.Connection:
        try:
            conn = self._conn(create=False)
            complete = conn.execute("SELECT value FROM index_info WHERE key = 'complete'").fetchone()
        except sqlite3.DatabaseError as err:
            self._close()
            raise IndexUnusable(self.path, "damaged", str(err)) from err
        if complete is None or complete[0] != "1":
            raise IndexUnusable(self.path, "incomplete")
        return conn

    def get(self, tenant_id: str, session_id: str) -> SessionRow | None:
        """The row of one session as stored, or None (`IndexUnusable` when the file is missing/damaged)."""
        if not self.path.exists():
            raise IndexUnusable(self.path, "missing")
        try:
            conn = self._conn(create=False)
            found = conn.execute(
                f"SELECT {SELECT} FROM sessions WHERE tenant_id = ? AND session_id = ?",
                (*self._status_args(), tenant_id, session_id),
            ).fetchone()
        except sqlite3.DatabaseError as err:
            self._close()
            raise IndexUnusable(self.path, "damaged", str(err)) from err
        return None if found is None else row_of(found)

    def page(
        self,
        tenant_id: str,
        where: RowFilter = EVERY_ROW,
        *,
        order: Order = "activity",
        descending: bool = True,
        after: str | None = None,
        limit: int | None = 20,
        offset: int = 0,
    ) -> list[SessionRow]:
        """One page of the tenant's rows matching `where`, in `order` (ties by session id).

        `after`: the cursor (`cursor()`) of the previous page's last row, in the same order.
        """
        clause, args = filters_sql(tenant_id, where)
        col = _COLUMNS[order]
        sort_col = "effective_status" if order == "status" else col
        if after is not None:
            value, sid = decode_cursor(after, order)
            clause += f" AND ({sort_col}, session_id) {'<' if descending else '>'} (?, ?)"
            args += [value, sid]
        direction = "DESC" if descending else "ASC"
        sql = (
            f"SELECT * FROM (SELECT {SELECT} FROM sessions) WHERE {clause} "
            f"ORDER BY {sort_col} {direction}, session_id {direction}"
        )
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            args += [limit, offset]
        elif offset:
            sql += " LIMIT -1 OFFSET ?"
            args.append(offset)
        conn = self._reader()
        try:
            return [row_of(r) for r in conn.execute(sql, [*self._status_args(), *args]).fetchall()]
        except sqlite3.DatabaseError as err:
            self._close()
            raise IndexUnusable(self.path, "damaged", str(err)) from err

    def count(self, tenant_id: str, where: RowFilter = EVERY_ROW) -> int:
        """How many of the tenant's rows match `where`."""
        clause, args = filters_sql(tenant_id, where)
        conn = self._reader()
        try:
            sql = f"SELECT count(*) FROM (SELECT {SELECT} FROM sessions) WHERE {clause}"
            return int(conn.execute(sql, [*self._status_args(), *args]).fetchone()[0])
        except sqlite3.DatabaseError as err:
            self._close()
            raise IndexUnusable(self.path, "damaged", str(err)) from err

    def reclaimable(self, before: datetime, done: Sequence[str]) -> list[SessionRow]:
        """Rows of every tenant past a retention: expired before `before`, or of a `done` status
        (e.g. ENDED) with no activity since `before`. One query (indexed by expiry), no walk."""
        cut = us(before)
        marks = ", ".join("?" * len(done)) or "NULL"
        sql = (
            f"SELECT {SELECT} FROM sessions WHERE (expires_us IS NOT NULL AND expires_us < ?) "
            f"OR (status IN ({marks}) AND active_us < ?) ORDER BY tenant_id, session_id"
        )
        conn = self._reader()
        try:
            return [row_of(r) for r in conn.execute(sql, [*self._status_args(), cut, *done, cut]).fetchall()]
        except sqlite3.DatabaseError as err:
            self._close()
            raise IndexUnusable(self.path, "damaged", str(err)) from err

    @staticmethod
    def cursor(row: SessionRow, order: Order = "activity") -> str:
        """The cursor that continues a page after `row`."""
        value: Any
        if order == "activity":
            value = us(row.last_activity)
        elif order == "created":
            value = us(row.created_at)
        elif order == "status":
            value = row.status
        else:
            value = row.session_id
        return encode_cursor(order, value, row.session_id)

    def _status_args(self) -> list[Any]:
        live, expired = self.expiry or ("", "")
        return [live, int(self._clock() * 1_000_000), expired]
