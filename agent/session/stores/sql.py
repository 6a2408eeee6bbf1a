"""L3: sessions and page messages in SQL (SQLAlchemy 2 Core). SQLite by default, PostgreSQL by URL.

Tables (tenant_id is part of every primary key):
- `sessions` (tenant_id, session_id) -> routing columns for listing plus `data`, the session document;
- `chat_messages` (tenant_id, session_id, message_id) -> the page history rows of `ChatMemory`
  (`message_id` is the event-log entry id, so re-inserting a row is a no-op).

The tables are made and changed only by the Alembic migrations (agent/session/migrations, see
`stores/schema_version.py`): `init()` applies them (what `agentrt db upgrade` calls, and what constructing
with `create=True` does: the embedded SQLite default), `check_schema()` refuses a database whose
schema is missing or older. The `Table` objects (`stores/tables.py`) describe the newest schema.
An embedded SQLite file that does not exist yet is made (with its folder) by the first write, not
by opening the store: a command that only reads, or fails, leaves no `.agentrt/` behind, and a
read of the missing file answers "nothing stored". `table_prefix` / `schema` let tests and several
deployments share one database. Every SQLAlchemy error leaves this module as `BackendUnavailable`.
"""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from agent.core.errors import BackendUnavailable
from agent.session.session import ChatSession, PageMessage, SessionDocumentCorrupt
from agent.session.stores import schema_version as sql_schema
from agent.session.stores.listing import index_meta
from agent.session.stores.sql_lazy import SQLITE_FILE as SQLITE_FILE  # where the embedded database's name lives
from agent.session.stores.sql_lazy import sqlite_file as sqlite_file
from agent.session.stores.sql_lazy import sqlite_url as sqlite_url
from agent.session.stores.tables import session_tables


def _normalize_url(url: str) -> str:
    # psycopg 3 is the installed driver; plain postgresql:// would ask SQLAlchemy for psycopg2.
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("postgres://"):
        return "postgresql+psycopg://" + url[len("postgres://") :]
    return url


_UPGRADE = threading.Lock()
"""Alembic keeps its running migration in module globals: two upgrades in threads of one process
(two runners making their SQLite files on first write) must take turns."""


class SqlSessionStore:
    """Session documents and chat message rows in a SQL database."""

    name = "SQL"

    def __init__(
        self,
        url: str,
        table_prefix: str = "",
        schema: str | None = None,
        create: bool = False,
        connect_timeout: int = 5,
        engine: sa.Engine | None = None,
    ) -> None:
        self.url = _normalize_url(url)
        self._unmade: Path | None = None
        """The SQLite file this store makes at its first write (None: the database is there)."""
        if engine is None:
            connect_args: dict[str, Any] = {}
            if self.url.startswith("postgresql"):
                connect_args["connect_timeout"] = connect_timeout
            elif self.url.startswith("sqlite:///") and self.url != "sqlite:///:memory:":
                file = Path(self.url[len("sqlite:///") :])
                if create and not file.exists():
                    self._unmade = file
                else:
                    file.parent.mkdir(parents=True, exist_ok=True)
            engine = sa.create_engine(self.url, pool_pre_ping=True, connect_args=connect_args)
        self.engine = engine
        self.table_prefix = table_prefix
        self.schema = schema
        tables = session_tables(table_prefix, schema)
        self.metadata = tables.metadata
        self.sessions = tables.sessions
        self.chat_messages = tables.chat_messages
        if create and self._unmade is None:
            self.init()

    # -- plumbing -----------------------------------------------------------------------------

    def _there(self, write: bool = False) -> bool:
        """Whether the database exists; a write (`write`) first makes a deferred SQLite file and its
        tables. False only for a read of a SQLite file nobody has made yet: nothing is stored."""
        if self._unmade is None:
            return True
        if not write and not self._unmade.exists():
            return False
        self.init()  # also when another process made the file meanwhile: its migrations may be mid-way
        return True

    def _fail(self, what: str, err: Exception) -> BackendUnavailable:
        text = str(err).lower()
        if "no such table" in text or ("does not exist" in text and "relation" in text):
            hint = "the tables are missing: run `agentrt db upgrade` (`agentrt db init` also creates the database)"
        else:
            hint = "check that the database is reachable and AGENTRT_DATABASE_URL points at it"
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return BackendUnavailable(f"SQL {what} failed ({type(err).__name__}: {first}); {hint}")

    def exists(self) -> bool:
        """Whether the database exists (False only for an embedded SQLite file not made yet)."""
        return self._there()

    def transaction(self, what: str) -> Any:
        """A connection in a transaction; SQLAlchemy errors leave it as `BackendUnavailable` (`what` failed)."""
        return self._tx(what)

    def decode(self, data: str, tenant_id: str, session_id: str) -> ChatSession:
        """A stored session document (`SessionDocumentCorrupt` naming the row when it is not one)."""
        return self._decode(data, tenant_id, session_id)

    @contextmanager
    def _tx(self, what: str) -> Iterator[sa.Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as err:
            raise self._fail(what, err) from err

    def init(self) -> str | None:
        """Apply the schema migrations up to the newest (safe to call twice); returns the revision before."""
        with _UPGRADE:
            if self._unmade is not None:
                self._unmade.parent.mkdir(parents=True, exist_ok=True)
                self._unmade = None
            try:
                return sql_schema.upgrade(self.engine, self.table_prefix, self.schema)
            except SQLAlchemyError as err:
                raise self._fail("schema upgrade", err) from err

    def check_schema(self, config_hint: str = "") -> None:
        """Raise `SchemaOutdated` (with the command to run) unless the schema is the newest."""
        sql_schema.check(self.engine, self.table_prefix, self.schema, config_hint)

    def revision(self) -> str | None:
        """The database's schema revision (None: no agentrt schema)."""
        if not self._there():
            return None
        try:
            return sql_schema.current(self.engine, self.table_prefix, self.schema)
        except SQLAlchemyError as err:
            raise self._fail("schema check", err) from err

    def drop(self) -> None:
        """Migrate down to nothing and drop the version table (tests, resetting a throw-away database)."""
        if not self._there():
            return
        try:
            if self.revision() is not None:
                sql_schema.downgrade(self.engine, "base", self.table_prefix, self.schema)
            version = sa.Table(sql_schema.version_table(self.table_prefix), sa.MetaData(schema=self.schema))
            version.drop(self.engine, checkfirst=True)
        except SQLAlchemyError as err:
            raise self._fail("drop", err) from err

    def dispose(self) -> None:
        """Close pooled connections."""
        self.engine.dispose()

    # -- sessions -----------------------------------------------------------------------------

    def get(self, tenant_id: str, session_id: str) -> ChatSession | None:
        """The session row of this tenant, or None."""
        if not self._there():
            return None
        t = self.sessions
        q = sa.select(t.c.data).where(t.c.tenant_id == tenant_id, t.c.session_id == session_id)
        with self._tx("read session") as conn:
            data = conn.execute(q).scalar_one_or_none()
        if data is None:
            return None
        session = self._decode(data, tenant_id, session_id)
        if session.tenant_id != tenant_id or session.session_id != session_id:
            return None
        return session

    def _decode(self, data: str, tenant_id: str, session_id: str) -> ChatSession:
        try:
            return ChatSession.from_json(data)
        except ValueError as err:
            raise SessionDocumentCorrupt(
                f"SQL row {tenant_id}/{session_id} in {self.sessions.name} is not a valid session "
                f"document ({err}); restore the row or delete it to refill from JSONL"
            ) from err

    def row(self, session: ChatSession) -> dict[str, Any]:
        """The session's row as `put` writes it (document and listing columns), e.g. for a bulk load."""
        return {
            "tenant_id": session.tenant_id,
            "session_id": session.session_id,
            "agent_id": session.agent_id,
            "user_id": session.user_id,
            "status": session.status.value,
            "version": session.version,
            "created_at": session.created_at,
            "last_active_time": session.last_active_time,
            "data": session.to_json(),
            "expires_at": session.expires_at(),
            "meta": json.dumps(index_meta(session, None), separators=(",", ":"), ensure_ascii=False),
        }

    def put(self, session: ChatSession) -> None:
        """Insert or replace the session row."""
        self._write(session, newer_only=False)

    def put_if_newer(self, session: ChatSession) -> None:
        """Insert the session row, or replace it only when it holds an older version (a replay
        racing a save of a newer copy never moves the row back)."""
        self._write(session, newer_only=True)

    def _write(self, session: ChatSession, newer_only: bool) -> None:
        self._there(write=True)
        row = self.row(session)
        t = self.sessions
        key = (t.c.tenant_id == session.tenant_id, t.c.session_id == session.session_id)
        values = {k: v for k, v in row.items() if k not in ("tenant_id", "session_id")}
        older = (t.c.version < session.version,) if newer_only else ()
        with self._tx("write session") as conn:
            if conn.execute(sa.update(t).where(*key, *older).values(**values)).rowcount:
                return
            if newer_only and conn.execute(sa.select(t.c.version).where(*key)).first() is not None:
                return  # the row holds this version or a newer one
            try:
                with conn.begin_nested():
                    conn.execute(sa.insert(t).values(**row))
            except IntegrityError:
                # Another writer inserted it between our UPDATE and INSERT: theirs is replaced.
                conn.execute(sa.update(t).where(*key).values(**values))

    def delete(self, tenant_id: str, session_id: str) -> None:
        """Delete the session row and its chat messages."""
        if not self._there():
            return
        with self._tx("delete session") as conn:
            for t in (self.chat_messages, self.sessions):
                conn.execute(sa.delete(t).where(t.c.tenant_id == tenant_id, t.c.session_id == session_id))

    def erase(self, tenant_id: str, session_id: str) -> int:
        """Delete the session row and its chat messages; returns how many rows went."""
        if not self._there():
            return 0
        n = 0
        with self._tx("erase session") as conn:
            for t in (self.chat_messages, self.sessions):
                n += conn.execute(sa.delete(t).where(t.c.tenant_id == tenant_id, t.c.session_id == session_id)).rowcount
        return n

    def erase_tenant_rest(self, tenant_id: str) -> int:
        """Delete every row of the tenant still left (chat messages whose session row is gone);
        returns how many. Called after each session of the tenant was erased."""
        if not self._there():
            return 0
        n = 0
        with self._tx("erase tenant") as conn:
            for t in (self.chat_messages, self.sessions):
                n += conn.execute(sa.delete(t).where(t.c.tenant_id == tenant_id)).rowcount
        return n

    def session_users(self, tenant_id: str, user_id: str | None = None) -> dict[str, str]:
        """Session id -> user id of the tenant's rows (only `user_id`'s when given), without the documents."""
        if not self._there():
            return {}
        t = self.sessions
        q = sa.select(t.c.session_id, t.c.user_id).where(t.c.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(t.c.user_id == user_id)
        with self._tx("list session ids") as conn:
            return {sid: user for sid, user in conn.execute(q).all()}

    def reclaimable(self, before: datetime, done: Sequence[str]) -> builtins.list[tuple[str, str]]:
        """(tenant, session) of the rows of every tenant past a retention: expired before `before`,
        or of a `done` status (e.g. ENDED) with no activity since `before` (`SessionIndex.reclaimable`
        of the files store)."""
        if not self._there():
            return []
        t = self.sessions
        expired = sa.and_(t.c.expires_at.is_not(None), t.c.expires_at < before)
        idle = sa.and_(t.c.status.in_(builtins.list(done)), t.c.last_active_time < before)
        q = sa.select(t.c.tenant_id, t.c.session_id).where(sa.or_(expired, idle))
        with self._tx("list sessions past the retention") as conn:
            return [(str(tenant), str(sid)) for tenant, sid in conn.execute(q.order_by(t.c.tenant_id, t.c.session_id))]

    def list(self, tenant_id: str, user_id: str | None = None) -> builtins.list[ChatSession]:
        """The tenant's sessions (only `user_id`'s when given), oldest first."""
        if not self._there():
            return []
        t = self.sessions
        q = sa.select(t.c.session_id, t.c.data).where(t.c.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(t.c.user_id == user_id)
        with self._tx("list sessions") as conn:
            rows = conn.execute(q.order_by(t.c.created_at, t.c.session_id)).all()
        out = [self._decode(data, tenant_id, sid) for sid, data in rows]
        return [s for s in out if s.tenant_id == tenant_id]

    def ping(self) -> bool:
        """Whether the database answers."""
        if not self._there():
            return True  # a SQLite file made at the first write: nothing to be down
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return True
        except SQLAlchemyError:
            return False

    # -- chat messages ------------------------------------------------------------------------

    def add_messages(
        self, tenant_id: str, session_id: str, branch_id: str, messages: builtins.list[PageMessage]
    ) -> int:
        """Insert page messages that carry an entry id (existing ones are kept); returns rows added."""
        self._there(write=True)
        t = self.chat_messages
        todo = [m for m in messages if m.entry_id]
        if not todo:
            return 0
        added = 0
        with self._tx("write chat messages") as conn:
            have = set(
                conn.execute(
                    sa.select(t.c.message_id).where(
                        t.c.tenant_id == tenant_id,
                        t.c.session_id == session_id,
                        t.c.message_id.in_([m.entry_id for m in todo]),
                    )
                ).scalars()
            )
            rows = [
                {
                    "tenant_id": tenant_id,
                    "session_id": session_id,
                    "message_id": m.entry_id,
                    "branch_id": branch_id,
                    "role": m.role,
                    "content": m.content,
                    "ts": m.ts,
                }
                for m in todo
                if m.entry_id not in have
            ]
            try:
                if rows:
                    with conn.begin_nested():
                        conn.execute(sa.insert(t), rows)
                added = len(rows)
            except IntegrityError:
                # Another writer (a replay of the outbox) inserted some meanwhile: the rest one by one.
                for row in rows:
                    try:
                        with conn.begin_nested():
                            conn.execute(sa.insert(t), row)
                        added += 1
                    except IntegrityError:
                        pass
        return added

    def count_messages(self, tenant_id: str, session_id: str) -> int:
        """How many chat message rows the session has."""
        if not self._there():
            return 0
        t = self.chat_messages
        q = sa.select(sa.func.count()).where(t.c.tenant_id == tenant_id, t.c.session_id == session_id)
        with self._tx("count chat messages") as conn:
            return int(conn.execute(q).scalar_one())

    def messages(self, tenant_id: str, session_id: str) -> builtins.list[tuple[str, PageMessage]]:
        """Every chat message row of the session as (branch_id, message), oldest first."""
        if not self._there():
            return []
        t = self.chat_messages
        q = (
            sa.select(t.c.branch_id, t.c.message_id, t.c.role, t.c.content, t.c.ts)
            .where(t.c.tenant_id == tenant_id, t.c.session_id == session_id)
            .order_by(t.c.ts, t.c.message_id)
        )
        with self._tx("read chat messages") as conn:
            rows = conn.execute(q).all()
        return [(b, PageMessage(role=r, content=c, entry_id=mid, ts=_aware(ts))) for b, mid, r, c, ts in rows]


def _aware(ts: datetime) -> datetime:
    # SQLite hands back naive datetimes even for timezone=True columns; they were written as UTC.
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts
