"""L3: sessions and page messages in SQL (SQLAlchemy 2 Core). SQLite by default, PostgreSQL by URL.

Tables (tenant_id is part of every primary key):
- `sessions` (tenant_id, session_id) -> routing columns for listing plus `data`, the session document;
- `chat_messages` (tenant_id, session_id, message_id) -> the page history rows of `ChatMemory`
  (`message_id` is the event-log entry id, so re-inserting a row is a no-op).

The tables are made and changed only by the Alembic migrations (agent/session/migrations, see
`stores/schema.py`): `init()` applies them (what `agentrt db upgrade` calls, and what constructing
with `create=True` does: the embedded SQLite default), `check_schema()` refuses a database whose
schema is missing or older. The `Table` objects below describe the newest schema for queries only.
`table_prefix` / `schema` let tests and several deployments share one database. Every SQLAlchemy
error leaves this module as `StorageError`.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from agent.errors import StorageError
from agent.session.session import ChatSession, PageMessage, SessionDocumentCorrupt
from agent.session.stores import schema as sql_schema

SQLITE_FILE = "agentrt.db"
"""The embedded session store's database, at the root of `base_dir`."""


def sqlite_file(base_dir: Path | str) -> Path:
    """The embedded SQLite database of the session store (`base_dir/agentrt.db`)."""
    return Path(base_dir) / SQLITE_FILE


def sqlite_url(base_dir: Path | str) -> str:
    """The embedded default database: `base_dir/agentrt.db`."""
    return f"sqlite:///{sqlite_file(base_dir)}"


def _normalize_url(url: str) -> str:
    # psycopg 3 is the installed driver; plain postgresql:// would ask SQLAlchemy for psycopg2.
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("postgres://"):
        return "postgresql+psycopg://" + url[len("postgres://") :]
    return url


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
        if engine is None:
            connect_args: dict[str, Any] = {}
            if self.url.startswith("postgresql"):
                connect_args["connect_timeout"] = connect_timeout
            elif self.url.startswith("sqlite:///"):
                Path(self.url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
            engine = sa.create_engine(self.url, pool_pre_ping=True, connect_args=connect_args)
        self.engine = engine
        self.table_prefix = table_prefix
        self.schema = schema
        self.metadata = sa.MetaData(schema=schema)
        self.sessions = sa.Table(
            f"{table_prefix}sessions",
            self.metadata,
            sa.Column("tenant_id", sa.String(64), primary_key=True),
            sa.Column("session_id", sa.String(64), primary_key=True),
            sa.Column("agent_id", sa.String(255), nullable=False),
            sa.Column("user_id", sa.String(255), nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("last_active_time", sa.DateTime(timezone=True), nullable=False),
            sa.Column("data", sa.Text, nullable=False),
            sa.Index(f"ix_{table_prefix}sessions_user", "tenant_id", "user_id"),
        )
        self.chat_messages = sa.Table(
            f"{table_prefix}chat_messages",
            self.metadata,
            sa.Column("tenant_id", sa.String(64), primary_key=True),
            sa.Column("session_id", sa.String(64), primary_key=True),
            sa.Column("message_id", sa.String(64), primary_key=True),
            sa.Column("branch_id", sa.String(64), nullable=False),
            sa.Column("role", sa.String(32), nullable=False),
            sa.Column("content", sa.Text, nullable=False),
            sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
            sa.Index(f"ix_{table_prefix}chat_messages_session", "tenant_id", "session_id", "ts"),
        )
        if create:
            self.init()

    # -- plumbing -----------------------------------------------------------------------------

    def _fail(self, what: str, err: Exception) -> StorageError:
        text = str(err).lower()
        if "no such table" in text or ("does not exist" in text and "relation" in text):
            hint = "the tables are missing: run `agentrt db upgrade` (`agentrt db init` also creates the database)"
        else:
            hint = "check that the database is reachable and AGENTRT_DATABASE_URL points at it"
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return StorageError(f"SQL {what} failed ({type(err).__name__}: {first}); {hint}")

    @contextmanager
    def _tx(self, what: str) -> Iterator[sa.Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as err:
            raise self._fail(what, err) from err

    def init(self) -> str | None:
        """Apply the schema migrations up to the newest (safe to call twice); returns the revision before."""
        try:
            return sql_schema.upgrade(self.engine, self.table_prefix, self.schema)
        except SQLAlchemyError as err:
            raise self._fail("schema upgrade", err) from err

    def check_schema(self, config_hint: str = "") -> None:
        """Raise `SchemaOutdated` (with the command to run) unless the schema is the newest."""
        sql_schema.check(self.engine, self.table_prefix, self.schema, config_hint)

    def revision(self) -> str | None:
        """The database's schema revision (None: no agentrt schema)."""
        try:
            return sql_schema.current(self.engine, self.table_prefix, self.schema)
        except SQLAlchemyError as err:
            raise self._fail("schema check", err) from err

    def drop(self) -> None:
        """Migrate down to nothing and drop the version table (tests, resetting a throw-away database)."""
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

    def put(self, session: ChatSession) -> None:
        """Insert or replace the session row."""
        row = {
            "tenant_id": session.tenant_id,
            "session_id": session.session_id,
            "agent_id": session.agent_id,
            "user_id": session.user_id,
            "status": session.status.value,
            "version": session.version,
            "created_at": session.created_at,
            "last_active_time": session.last_active_time,
            "data": session.to_json(),
        }
        t = self.sessions
        key = (t.c.tenant_id == session.tenant_id, t.c.session_id == session.session_id)
        values = {k: v for k, v in row.items() if k not in ("tenant_id", "session_id")}
        with self._tx("write session") as conn:
            if conn.execute(sa.update(t).where(*key).values(**values)).rowcount:
                return
            try:
                with conn.begin_nested():
                    conn.execute(sa.insert(t).values(**row))
            except IntegrityError:
                # Another writer inserted it between our UPDATE and INSERT: theirs is replaced.
                conn.execute(sa.update(t).where(*key).values(**values))

    def delete(self, tenant_id: str, session_id: str) -> None:
        """Delete the session row and its chat messages."""
        with self._tx("delete session") as conn:
            for t in (self.chat_messages, self.sessions):
                conn.execute(sa.delete(t).where(t.c.tenant_id == tenant_id, t.c.session_id == session_id))

    def list(self, tenant_id: str, user_id: str | None = None) -> builtins.list[ChatSession]:
        """The tenant's sessions (only `user_id`'s when given), oldest first."""
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
        t = self.chat_messages
        todo = [m for m in messages if m.entry_id]
        if not todo:
            return 0
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
            if rows:
                conn.execute(sa.insert(t), rows)
        return len(rows)

    def count_messages(self, tenant_id: str, session_id: str) -> int:
        """How many chat message rows the session has."""
        t = self.chat_messages
        q = sa.select(sa.func.count()).where(t.c.tenant_id == tenant_id, t.c.session_id == session_id)
        with self._tx("count chat messages") as conn:
            return int(conn.execute(q).scalar_one())

    def messages(self, tenant_id: str, session_id: str) -> builtins.list[tuple[str, PageMessage]]:
        """Every chat message row of the session as (branch_id, message), oldest first."""
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
