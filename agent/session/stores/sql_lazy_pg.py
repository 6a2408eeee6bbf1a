"""The PostgreSQL session table without SQLAlchemy, for one-shot readers, until something needs it.

`agentrt show`, `tool-result` and `doctor` on a PostgreSQL deployment find the session in the
record store: the session table is only asked to confirm its schema is the newest when the manager
opens, and for a read the record store misses (an unknown id, another tenant's). Both run here
with psycopg (which the record store has loaded anyway): `check_schema` reads the revision row and
returns when it is `HEAD`; `get` reads the session row as `SqlSessionStore.get` does. Any other
outcome (no version table, another revision, an error, a row that is no session document) and any
other call go to the real `SqlSessionStore`, built on first use, which answers in its own words.

`agentrt sessions` lists a page the same way (`sessions_page`): the query of
`sql_listing.sessions_page` written out for PostgreSQL (tenant, user, status read with expiry,
thread metadata compared as `jsonb`, the cursor, newest activity first). A filter the command does
not make (any-of, none-of, ids) and any error or undecodable row go to `sql_listing` on the real store.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent.session.stores.sql_lazy import HEAD

if TYPE_CHECKING:
    import psycopg

    from agent.session.session import ChatSession
    from agent.session.stores.sql import SqlSessionStore
    from checkpointing.session_index import RowFilter

_SCHEMES = ("postgresql://", "postgresql+psycopg://", "postgres://")
_READ_AS = "CASE WHEN status = %s AND expires_at IS NOT NULL AND expires_at <= %s THEN %s ELSE status END"
"""The status a row reads with: an ACTIVE row whose expiry has passed reads EXPIRED (`sql_listing`)."""


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

    def sessions_page(
        self,
        tenant_id: str,
        where: RowFilter,
        *,
        after: tuple[datetime, str] | None = None,
        limit: int | None = 20,
    ) -> list[tuple[ChatSession, str]]:
        """`sql_listing.sessions_page` on this table: (session, status at read), newest activity first."""
        got = self._page(tenant_id, where, after, limit) if self._plain(where) else None
        if got is not None:
            return got
        from agent.session.stores.sql_listing import sessions_page

        return sessions_page(self.real, tenant_id, where, after=after, limit=limit)

    @staticmethod
    def _plain(where: RowFilter) -> bool:
        return not where.meta_any and not where.meta_not and where.ids is None and not list(where.exclude_ids)

    def _page(
        self, tenant_id: str, where: RowFilter, after: tuple[datetime, str] | None, limit: int | None
    ) -> list[tuple[ChatSession, str]] | None:
        """The page read here, or None for the real store to answer."""
        import psycopg

        from agent.core.statuses import SessionStatus
        from agent.session.session import ChatSession

        live, expired = SessionStatus.ACTIVE.value, SessionStatus.EXPIRED.value
        now = datetime.now(UTC)
        params: list[Any] = [live, now, expired, tenant_id]
        sql = f"SELECT session_id, data, {_READ_AS} FROM sessions WHERE tenant_id = %s"
        if where.user_id is not None:
            sql += " AND user_id = %s"
            params.append(where.user_id)
        if where.status is not None:
            sql += f" AND {_READ_AS} = %s"
            params += [live, now, expired, where.status]
        for path, value in where.meta:
            sql += " AND CAST(meta AS JSONB) #> CAST(%s AS TEXT[]) = CAST(%s AS JSONB)"
            params += [list(path), json.dumps(value)]
        if after is not None:
            sql += " AND (last_active_time, session_id) < (%s, %s)"
            params += [after[0], after[1]]
        sql += " ORDER BY last_active_time DESC, session_id DESC"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
        conn = self._connection()
        if conn is None:
            return None
        try:
            rows = conn.execute(sql, params).fetchall()
        except psycopg.Error:
            self._close()
            return None
        out: list[tuple[ChatSession, str]] = []
        for _sid, data, status in rows:
            try:
                session = ChatSession.from_json(data)
            except (ValueError, TypeError):
                return None  # the real store names the damaged row
            if session.tenant_id == tenant_id:
                out.append((session, str(status)))
        return out

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
