"""The PostgreSQL session table without SQLAlchemy, for one-shot readers, until something needs it.

`agentrt show`, `tool-result` and `doctor` on a PostgreSQL deployment find the session in the
record store: the session table is only asked to confirm its schema is the newest when the manager
opens, and for a read the record store misses (an unknown id, another tenant's). Both run here
with psycopg (which the record store has loaded anyway): `check_schema` reads the revision row and
returns when it is `HEAD`; `get` reads the session row as `SqlSessionStore.get` does. Any other
outcome (no version table, another revision, an error, a row that is no session document) and any
other call go to the real `SqlSessionStore`, built on first use, which answers in its own words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.session.stores.sql_lazy import HEAD

if TYPE_CHECKING:
    import psycopg

    from agent.session.session import ChatSession
    from agent.session.stores.sql import SqlSessionStore

_SCHEMES = ("postgresql://", "postgresql+psycopg://", "postgres://")


class LazyPgSessionStore:
    """A `SqlSessionStore(url)` over PostgreSQL, made on first use (see the module doc)."""

    name = "SQL"

    def __init__(self, url: str) -> None:
        self.url = url
        self._real: SqlSessionStore | None = None
        self._conn: psycopg.Connection[Any] | None = None

    @staticmethod
    def server(url: str) -> bool:
        """Whether `url` names a PostgreSQL database this class can stand for."""
        return url.startswith(_SCHEMES)

    @property
    def real(self) -> SqlSessionStore:
        """The SQL layer itself (SQLAlchemy loads here)."""
        if self._real is None:
            from agent.session.stores.sql import SqlSessionStore

            self._close()
            self._real = SqlSessionStore(self.url)
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def _connection(self) -> psycopg.Connection[Any] | None:
        if self._real is not None:
            return None
        if self._conn is None:
            import psycopg

            conninfo = "postgresql://" + self.url.split("://", 1)[1]
            try:
                self._conn = psycopg.connect(conninfo, connect_timeout=5, autocommit=True)
            except psycopg.Error:
                return None
        return self._conn

    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[bool, Any]:
        """(True, the first column of the first row or None) read here; (False, None) on any error."""
        import psycopg

        conn = self._connection()
        if conn is None:
            return False, None
        try:
            row = conn.execute(sql, params).fetchone()
        except psycopg.Error:
            self._close()
            return False, None
        return True, row[0] if row else None

    def check_schema(self, config_hint: str = "") -> None:
        """`SqlSessionStore.check_schema`: returns at once at `HEAD`, else the real store decides."""
        ok, found = self._one("SELECT version_num FROM alembic_version")
        if ok and found == HEAD:
            return
        self.real.check_schema(config_hint)

    def get(self, tenant_id: str, session_id: str) -> ChatSession | None:
        """The session row of this tenant, or None, read as `SqlSessionStore.get` reads it."""
        ok, data = self._one(
            "SELECT data FROM sessions WHERE tenant_id = %s AND session_id = %s", (tenant_id, session_id)
        )
        if not ok:
            return self.real.get(tenant_id, session_id)
        if data is None:
            return None
        from agent.session.session import ChatSession

        try:
            session = ChatSession.from_json(data)
        except (ValueError, TypeError):
            return self.real.get(tenant_id, session_id)  # it reports the damage in its words
        if session.tenant_id != tenant_id or session.session_id != session_id:
            return None
        return session

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
