"""The embedded SQLite session layer without SQLAlchemy, until something needs SQLAlchemy.

A one-shot reader (`agentrt show`, `tool-result`, `doctor`) on the embedded default reads the
JSONL layer first and finds the session there: the SQL layer is never asked, so SQLAlchemy need not
load. When JSONL misses (an unknown id, another tenant's), PRIMARY's read order asks SQL next;
`LazySqlSessionStore.get` reads the row with the standard library's `sqlite3` on a read-only
connection, as `SqlSessionStore.get` does with SQLAlchemy (no file or no row: None; else the
session document). Anything else (a file it cannot read, a row that is no session document, any
other call) goes to the real `SqlSessionStore`, built on first use with the same arguments.

A turn (`agentrt run`) writes the session row and its chat messages and counts them: on a database
at the newest schema revision (`HEAD`), `put`, `put_if_newer`, `add_messages` and `count_messages`
run here with `sqlite3` as the same statements, in one transaction each, committed before they
return (SQLite's default `synchronous=FULL`, as through SQLAlchemy), storing datetimes in the text
form SQLAlchemy gives them. A database not made yet is made here at `HEAD` by the first write
(`sql_lazy_schema`: the migrations' statements, without Alembic). A database at another
revision, or a `sqlite3` error, hands the call to the real store, which migrates the tables or
reports the failure.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.session.stores.sql_lazy_schema import create_at_head

if TYPE_CHECKING:
    from agent.session.session import ChatSession, PageMessage
    from agent.session.stores.sql import SqlSessionStore

HEAD = "0008"
"""The newest session schema revision this agentrt ships (a test checks it equals the migration
scripts' head; `schema.HEAD` is this one)."""

SQLITE_FILE = "agentrt.db"
"""The embedded session store's database, at the root of `base_dir`."""
_PREFIX = "sqlite:///"


def sqlite_file(base_dir: Path | str) -> Path:
    """The embedded SQLite database of the session store (`base_dir/agentrt.db`)."""
    return Path(base_dir) / SQLITE_FILE


def sqlite_url(base_dir: Path | str) -> str:
    """The embedded default database: `base_dir/agentrt.db`."""
    return f"sqlite:///{sqlite_file(base_dir)}"


class LazySqlSessionStore:
    """A `SqlSessionStore(url, create=True)` over a SQLite file, made on first use (see the module doc)."""

    name = "SQL"

    def __init__(self, url: str) -> None:
        self.url = url
        self.file = Path(url[len(_PREFIX) :])
        self._real: SqlSessionStore | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @staticmethod
    def embedded(url: str) -> bool:
        """Whether `url` names a SQLite file this class can stand for (no options, not in memory)."""
        return url.startswith(_PREFIX) and "?" not in url and url != _PREFIX + ":memory:"

    @property
    def real(self) -> SqlSessionStore:
        """The SQL layer itself (SQLAlchemy loads here)."""
        if self._real is None:
            from agent.session.stores.sql import SqlSessionStore

            self._real = SqlSessionStore(self.url, create=True)
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get(self, tenant_id: str, session_id: str) -> ChatSession | None:
        """The session row of this tenant, or None, read as `SqlSessionStore.get` reads it; the real
        store answers when the file cannot be read here or its row is not a session document."""
        if self._real is not None:
            return self._real.get(tenant_id, session_id)
        if not self.file.exists():
            return None  # a read of a database nobody made: `SqlSessionStore` answers None too
        from agent.session.session import ChatSession

        try:
            conn = sqlite3.connect(self.file.resolve().as_uri() + "?mode=ro", uri=True)
            try:
                row = conn.execute(
                    "SELECT data FROM sessions WHERE tenant_id = ? AND session_id = ?", (tenant_id, session_id)
                ).fetchone()
            finally:
                conn.close()
            if row is None:
                return None
            session = ChatSession.from_json(row[0])
        except (sqlite3.Error, ValueError, TypeError):
            return self.real.get(tenant_id, session_id)  # it reports the outage or the damage in its words
        if session.tenant_id != tenant_id or session.session_id != session_id:
            return None
        return session

    # -- the turn's writes, at HEAD ---------------------------------------------------------------

    def _writer(self, make: bool = False) -> sqlite3.Connection | None:
        """A connection to write with here, or None: the real store must take the call (another
        revision, or the real store already open). A missing database is made at `HEAD` when
        `make` (a write), else None (a count makes nothing)."""
        if self._real is not None:
            return None
        if self._conn is None:
            if not self.file.exists():
                if not make:
                    return None
                try:
                    create_at_head(self.file, HEAD)  # False: another process made it meanwhile
                except (sqlite3.Error, OSError):
                    return None  # the real store makes it, or reports why it cannot
            try:
                conn = sqlite3.connect(self.file, isolation_level=None, check_same_thread=False)
                try:
                    found = conn.execute("SELECT version_num FROM alembic_version").fetchall()
                except sqlite3.Error:
                    found = []
                if found != [(HEAD,)]:
                    conn.close()
                    return None
            except sqlite3.Error:
                return None
            self._conn = conn
        return self._conn

    def _run(self, statements: list[tuple[str, Any]], many: bool = False) -> int | None:
        """Run `statements` in one transaction here; the rows they changed, or None when the real
        store must take the call (nothing was written then)."""
        with self._lock:
            conn = self._writer(make=True)
            if conn is None:
                return None
            try:
                before = conn.total_changes
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for sql, params in statements:
                        if many:
                            conn.executemany(sql, params)
                        else:
                            conn.execute(sql, params)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                return conn.total_changes - before
            except sqlite3.Error:
                self._close()
                return None

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def put(self, session: ChatSession) -> None:
        """Insert or replace the session row."""
        if self._run([(_UPSERT, _row(session))]) is None:
            self.real.put(session)

    def put_if_newer(self, session: ChatSession) -> None:
        """Insert the session row, or replace it only when it holds an older version."""
        if self._run([(_UPSERT + _NEWER, _row(session))]) is None:
            self.real.put_if_newer(session)

    def add_messages(self, tenant_id: str, session_id: str, branch_id: str, messages: list[PageMessage]) -> int:
        """Insert page messages that carry an entry id (existing ones are kept); returns rows added."""
        rows = [(tenant_id, session_id, m.entry_id, branch_id, m.role, m.content, _when(m.ts)) for m in messages]
        rows = [r for r in rows if r[2]]
        if not rows:
            return 0
        added = self._run([(_ADD_MESSAGE, rows)], many=True)
        if added is None:
            return self.real.add_messages(tenant_id, session_id, branch_id, messages)
        return added

    def count_messages(self, tenant_id: str, session_id: str) -> int:
        """How many chat message rows the session has."""
        with self._lock:
            conn = self._writer()
            if conn is not None:
                try:
                    q = "SELECT count(*) FROM chat_messages WHERE tenant_id = ? AND session_id = ?"
                    return int(conn.execute(q, (tenant_id, session_id)).fetchone()[0])
                except sqlite3.Error:
                    self._close()
        if self._real is None and not self.file.exists():
            return 0
        return self.real.count_messages(tenant_id, session_id)


_COLUMNS = (
    "tenant_id, session_id, agent_id, user_id, status, version, created_at, last_active_time, data, expires_at, meta"
)
_UPSERT = (
    f"INSERT INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (tenant_id, session_id) DO UPDATE SET agent_id = excluded.agent_id, user_id = excluded.user_id, "
    "status = excluded.status, version = excluded.version, created_at = excluded.created_at, "
    "last_active_time = excluded.last_active_time, data = excluded.data, expires_at = excluded.expires_at, "
    "meta = excluded.meta"
)
_NEWER = " WHERE sessions.version < excluded.version"
_ADD_MESSAGE = (
    "INSERT INTO chat_messages (tenant_id, session_id, message_id, branch_id, role, content, ts) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


def _when(ts: datetime | None) -> str | None:
    """A datetime as SQLAlchemy stores it in SQLite (its fields as given, microseconds always)."""
    if ts is None:
        return None
    return (
        f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d} {ts.hour:02d}:{ts.minute:02d}:{ts.second:02d}.{ts.microsecond:06d}"
    )


def _row(session: ChatSession) -> tuple[Any, ...]:
    """The session's row as `SqlSessionStore.row` makes it, in `_COLUMNS` order."""
    from agent.session.stores.listing import index_meta

    return (
        session.tenant_id,
        session.session_id,
        session.agent_id,
        session.user_id,
        session.status.value,
        session.version,
        _when(session.created_at),
        _when(session.last_active_time),
        session.to_json(),
        _when(session.expires_at()),
        json.dumps(index_meta(session, None), separators=(",", ":"), ensure_ascii=False),
    )
