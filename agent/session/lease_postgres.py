"""`PostgresLease`: the session lease in one PostgreSQL table, for several hosts without Redis.

One row per (tenant, session, scope) in `<table_prefix>session_leases` (made by the Alembic
migration 0003, `agentrt db upgrade`): `holder`, `token`, `expires_at`. `scope` keeps a session's
run lease (`run`) apart from the workers' drain lease (`drain`).

- `acquire` is one statement: `INSERT ... ON CONFLICT DO UPDATE ... WHERE` the row is free
  (released: no holder) or expired, setting `token = greatest(token, token_floor) + 1`. Row locking
  serialises concurrent grants, so tokens grow in grant order; the row outlives release and
  expiry, so the counter does too (only `agentrt erase`, which deletes the session and its
  fence, deletes it: `forget`). When the row is held, the same statement returns the holder
  and expiry for `LeaseHeld`.
- `extend` and `release` compare holder and token: a grant that was taken over cannot push the new
  holder's expiry nor free it. A lease lapses `ttl_s` after its last extension, by the database's
  clock (no clock of any client matters): a holder paused past it loses the session, and the
  fencing token (`checkpointing.fencing`) refuses its late writes.
- PgBouncer in transaction pooling works: every operation is one autocommit statement with bound
  parameters, no prepared statements (`prepare_threshold=None`), no advisory or session state.

Errors: a missing table is `SchemaOutdated` ("run `agentrt db upgrade`"), an unreachable database
a `BackendUnavailable` naming host:port (never the password).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from agent.core.errors import BackendUnavailable, ConfigError, LeaseHeld, SchemaOutdated
from agent.session.lease import DEFAULT_TTL_S, LeaseGrant, _check_ids, _lost, make_holder

TABLE = "session_leases"
"""The lease table's name (after `table_prefix`), as migration 0003 makes it."""
RUN_SCOPE = "run"
DRAIN_SCOPE = "drain"

# A grant, or (when the row is held) the current holder, in one statement. The fallback SELECT
# reads the statement's snapshot: a row another transaction inserted meanwhile is invisible to it,
# and then no row comes back (`_held_now` reads it afterwards).
_ACQUIRE = """
WITH granted AS (
  INSERT INTO {t} AS l (tenant_id, session_id, scope, holder, token, expires_at)
  VALUES (%(tenant)s, %(session)s, %(scope)s, %(holder)s, %(floor)s::bigint + 1,
          now() + make_interval(secs => %(ttl)s))
  ON CONFLICT (tenant_id, session_id, scope) DO UPDATE
    SET holder = EXCLUDED.holder,
        token = greatest(l.token, %(floor)s::bigint) + 1,
        expires_at = EXCLUDED.expires_at
    WHERE l.holder IS NULL OR l.expires_at <= now()
  RETURNING token, holder, expires_at
)
SELECT true, token, holder, extract(epoch FROM expires_at)::float8 FROM granted
UNION ALL
SELECT false, token, holder, extract(epoch FROM expires_at)::float8 FROM {t}
 WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND scope = %(scope)s
   AND NOT EXISTS (SELECT 1 FROM granted)
"""

# A grant that lapsed while nobody took it (still our holder and token) is extended too.
_EXTEND = """
UPDATE {t} SET expires_at = now() + make_interval(secs => %(ttl)s)
 WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND scope = %(scope)s
   AND holder = %(holder)s AND token = %(token)s
RETURNING extract(epoch FROM expires_at)::float8
"""

_RELEASE = """
UPDATE {t} SET holder = NULL, expires_at = now()
 WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND scope = %(scope)s
   AND holder = %(holder)s AND token = %(token)s
"""

# What `agentrt erase` leaves of a session: its rows of every scope, unless a run holds one now.
_FORGET = """
WITH gone AS (
  DELETE FROM {t}
   WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND (holder IS NULL OR expires_at <= now())
  RETURNING 1
)
SELECT count(*) FROM gone
"""

_STATE = """
SELECT holder, token, extract(epoch FROM expires_at)::float8, expires_at <= now() FROM {t}
 WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND scope = %(scope)s
"""


def libpq_url(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL (`postgresql+psycopg://`, `postgres://`) as libpq takes it."""
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


class PostgresLease:
    """Session leases in a PostgreSQL table shared by every host (see the module docstring).

    Args:
        url: the database, as `persistence.database_url` names it (`postgresql://...`).
        schema: the schema of the table (None: the connection's search path, as the session store).
        table_prefix: put before `session_leases` (tests, several deployments in one database).
        scope: `run` (the session lease) or `drain` (the workers' drain lease).
        config_hint: appended to the `agentrt db upgrade` command in messages (" --config F").
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        table_prefix: str = "",
        scope: str = RUN_SCOPE,
        connect_timeout: int = 5,
        config_hint: str = "",
    ) -> None:
        if not url.startswith(("postgresql", "postgres://")):
            raise ConfigError(
                "persistence.lease: postgres needs persistence.database_url (or AGENTRT_DATABASE_URL) to be a "
                f"PostgreSQL URL (postgresql://user@host:5432/db), got {url.split(':', 1)[0]}:...; "
                "set it, or use lease: file (one host) or redis"
            )
        self.url = libpq_url(url)
        try:
            info = conninfo_to_dict(self.url)
        except psycopg.ProgrammingError as err:
            raise ConfigError(f"persistence.database_url is not a valid PostgreSQL URL ({err})") from None
        self.where = f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"
        self.dbname = str(info.get("dbname") or info.get("user") or "")
        self._password = str(info.get("password") or "")
        self.scope = scope
        self.config_hint = config_hint
        self.table_name = f"{table_prefix}{TABLE}"
        table = sql.Identifier(schema, self.table_name) if schema else sql.Identifier(self.table_name)
        self._q = {k: sql.SQL(v).format(t=table) for k, v in _QUERIES.items()}
        self._connect_timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()  # one connection, shared with the heartbeat thread

    def acquire(
        self,
        tenant: str,
        session_id: str,
        holder: str | None = None,
        ttl_s: float = DEFAULT_TTL_S,
        token_floor: int | None = None,
    ) -> LeaseGrant:
        """Take the lease in one statement, or raise `LeaseHeld` naming the holder and expiry."""
        _check_ids(tenant, session_id, ttl_s)
        who = holder or make_holder()
        args = self._args(tenant, session_id, holder=who, ttl=float(ttl_s), floor=int(token_floor or 0))
        row = self._one("acquire", args)
        if row is None:  # inserted by a concurrent grant this statement's snapshot cannot see
            state = self._one("state", args)
            raise LeaseHeld(session_id, state[0] if state and state[0] else "unknown", state[2] if state else None)
        granted, token, current, expires = row
        if not granted and (current is None or expires <= time.time()):
            # The snapshot shows a free row, yet a grant committed meanwhile holds it: name that one.
            state = self._one("state", args)
            current, expires = (state[0], state[2]) if state else (None, None)
        if not granted:
            raise LeaseHeld(session_id, current or "unknown", expires)
        return LeaseGrant(int(token), who, float(expires), tenant, session_id, ttl_s)

    def extend(self, grant: LeaseGrant, ttl_s: float | None = None) -> LeaseGrant:
        """Push the expiry of a grant still held; `LeaseHeld` naming the new holder when it was lost."""
        ttl = grant.ttl_s if ttl_s is None else ttl_s
        args = self._args(grant.tenant, grant.session_id, holder=grant.holder, token=grant.token, ttl=float(ttl))
        row = self._one("extend", args)
        if row is None:
            state = self._one("state", args)
            held = state is not None and state[0] is not None and not state[3]
            raise _lost(grant, state[0] if held and state else None, state[2] if held and state else None)
        return replace(grant, expires_at=float(row[0]), ttl_s=ttl)

    def release(self, grant: LeaseGrant) -> None:
        """Free the lease if it still holds this grant; the token stays for the next grant to count on."""
        self._one("release", self._args(grant.tenant, grant.session_id, holder=grant.holder, token=grant.token))

    def forget(self, tenant: str, session_id: str) -> int:
        """Delete the session's lease rows (every scope) that no run holds, for a session erased for
        good (its fence went with it); how many were deleted."""
        row = self._one("forget", self._args(tenant, session_id))
        return int(row[0]) if row else 0

    def state(self, tenant: str, session_id: str) -> dict[str, Any]:
        """The row of a session: `holder` (None when free or expired), `token`, `expires_at`; {} when none."""
        row = self._one("state", self._args(tenant, session_id))
        if row is None:
            return {}
        holder, token, expires, lapsed = row
        return {"holder": None if lapsed else holder, "token": int(token), "expires_at": expires}

    def close(self) -> None:
        """Close the connection (the next operation opens a new one)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- plumbing ---------------------------------------------------------------------------------

    def _args(self, tenant: str, session_id: str, **more: Any) -> dict[str, Any]:
        return {"tenant": tenant, "session": session_id, "scope": self.scope, **more}

    def _one(self, what: str, args: dict[str, Any]) -> Any:
        """Run one query in its own (autocommit) transaction; its first row or None."""
        with self._lock:
            conn = self._connection()
            try:
                cur = conn.execute(self._q[what], args)
                return cur.fetchone() if cur.description else None
            except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
                raise SchemaOutdated(
                    f"the lease table {self.table_name} is missing in the database {self.dbname} on {self.where}: "
                    f"run `agentrt db upgrade{self.config_hint}`"
                ) from None
            except psycopg.Error as err:
                if conn.broken or isinstance(err, psycopg.OperationalError):
                    self._drop()
                raise BackendUnavailable(
                    f"lease {what} on PostgreSQL {self.where} failed ({type(err).__name__}: {self._reason(err)}); "
                    "check that the database is reachable and persistence.database_url points at it"
                ) from None

    def _connection(self) -> psycopg.Connection[Any]:
        if self._pid != os.getpid():  # a forked child (prefork workers): the socket is the parent's
            self._conn, self._pid = None, os.getpid()
        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            self._conn = psycopg.connect(
                self.url, autocommit=True, prepare_threshold=None, connect_timeout=self._connect_timeout
            )
        except psycopg.Error as err:
            raise BackendUnavailable(
                f"cannot reach the lease database at {self.where} ({self._reason(err)}); check that PostgreSQL "
                "is running there and persistence.database_url (AGENTRT_DATABASE_URL) points at it"
            ) from None
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def _reason(self, err: Exception) -> str:
        """The error's first line, without the password (libpq may echo the connection string)."""
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        text = lines[0] if lines else type(err).__name__
        return text.replace(self._password, "***") if self._password else text


_QUERIES = {"acquire": _ACQUIRE, "extend": _EXTEND, "release": _RELEASE, "forget": _FORGET, "state": _STATE}
