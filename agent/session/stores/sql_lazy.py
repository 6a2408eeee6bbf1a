"""The embedded SQLite session layer, opened only when a read needs it.

A one-shot reader (`agentrt show`, `tool-result`, `doctor`) on the embedded default reads the
JSONL layer first and finds the session there: the SQL layer is never asked, so SQLAlchemy need not
load. When JSONL misses (an unknown id, another tenant's), PRIMARY's read order asks SQL next;
`LazySqlSessionStore.get` reads the row with the standard library's `sqlite3` on a read-only
connection, as `SqlSessionStore.get` does with SQLAlchemy (no file or no row: None; else the
session document). Anything else (a file it cannot read, a row that is no session document, any
other call) goes to the real `SqlSessionStore`, built on first use with the same arguments.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.session.session import ChatSession
    from agent.session.stores.sql import SqlSessionStore

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
