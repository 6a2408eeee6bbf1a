"""The `postgres` store: the saver's records as rows of PostgreSQL tables (psycopg 3).

    store = PostgresStore("postgresql://postgres@127.0.0.1:5432/test")
    store.setup()                                   # creates the tables if missing
    saver = JsonlCheckpointSaver(store=store)       # or JsonlCheckpointSaver.from_url(url)

A record row holds the record exactly as its JSONL line (checksum and newline included) at its
byte position in the run's stream, so a stream's rows in order are the `files` store's
`checkpoints.jsonl`, byte for byte (tables: `pg_schema`). A session stream (`base.SESSION_STREAMS`:
the event log's `@events`, never a run id) is a stream row too, its rows the lines of its file on
the `files` store (`events.jsonl`); listings of runs and threads skip it.

- `PostgresStore` (here): the connection pool, `setup` (the migrations), listings of sessions,
  reservations. A session's rows: `session()`, a `pg_streams.PostgresSessionStreams` (appends,
  fencing, rewrites; its documents and index rows in `pg_docs`).
- Every id is a bound parameter; statements are composed only with the schema's identifier.
  Nothing session-scoped (no advisory session locks, only transaction-scoped ones; no prepared
  statements: `prepare_threshold=None`), so it works behind PgBouncer in transaction pooling mode.
- Connections come from a `psycopg_pool.ConnectionPool` (thread-safe).
- Blobs (large payloads) are rows too: `store.blobs` (`pg_blobs.PostgresBlobStore`), so a session
  needs nothing but the database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from checkpointing.exceptions import CorruptRecordError, InvalidIdError, StoreUnavailableError
from checkpointing.records import FsyncPolicy, decode_file, encode_record
from checkpointing.store.base import EVENTS
from checkpointing.store.pg_blobs import PostgresBlobStore
from checkpointing.store.pg_queries import QUERIES
from checkpointing.store.pg_schema import MIGRATIONS, MIGRATIONS_TABLE, SETUP_LOCK, schema_name
from checkpointing.store.pg_streams import PostgresSessionStreams

__all__ = ["PostgresSessionStreams", "PostgresStore"]


class PostgresStore:
    """Sessions as rows of PostgreSQL tables in `schema` (see the module docstring).

    Args:
        url: a libpq URL or conninfo, e.g. `postgresql://postgres@127.0.0.1:5432/test`.
        schema: the schema holding the tables (created by `setup`).
        max_connections: the pool's size (one saver call holds one connection at a time).
    """

    def __init__(self, url: str, *, schema: str = "public", max_connections: int = 4, timeout: float = 30.0) -> None:
        self.url = url
        self.schema = schema_name(schema)
        info = conninfo_to_dict(url.replace("postgresql+psycopg://", "postgresql://", 1))
        where = f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"
        self.name = f"postgresql://{where}?schema={self.schema}"
        self.label = f"postgresql:{info.get('dbname', '')}/{self.schema}"  # how its streams are named in messages
        s = sql.Identifier(self.schema)
        # Composed once: quoting the identifier on every execute cost as much as a round trip.
        self.q = {k: sql.SQL(v).format(s=s).as_bytes(None) for k, v in QUERIES.items()}
        self.pool = ConnectionPool(
            url.replace("postgresql+psycopg://", "postgresql://", 1),
            min_size=1,
            max_size=max_connections,
            timeout=timeout,
            kwargs={"autocommit": True, "prepare_threshold": None, "client_encoding": "UTF8"},
            open=False,
            name=f"jsonl-store-{self.schema}",
        )
        try:
            self.pool.open(wait=False)
        except psycopg.Error as err:
            raise StoreUnavailableError(f"{self.name}: cannot open a connection pool ({err})") from err

    @contextmanager
    def connection(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; a lost or unreachable database becomes `StoreUnavailableError`."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except (PoolTimeout, PoolClosed) as err:  # before OperationalError: they are ones
            raise StoreUnavailableError(f"{self.name}: {what}: no connection ({err})") from err
        except (psycopg.OperationalError, psycopg.InterfaceError) as err:
            raise self.lost(what, err) from err

    def getconn(self, what: str) -> psycopg.Connection[Any]:
        """A connection of the pool, for a caller that gives it back (`pool.putconn`) itself and maps
        a lost one with `lost`: `connection` without its two context managers (the append's path)."""
        try:
            return self.pool.getconn()
        except (PoolTimeout, PoolClosed) as err:
            raise StoreUnavailableError(f"{self.name}: {what}: no connection ({err})") from err

    def lost(self, what: str, err: Exception) -> StoreUnavailableError:
        """The error for `what` failing on a lost or unreachable database."""
        return StoreUnavailableError(
            f"{self.name}: {what} failed, PostgreSQL is unreachable or the connection was lost ({err}). "
            "A write in progress was committed whole or not at all: read the thread again and retry."
        )

    def setup(self) -> None:
        """Create the schema and tables if missing (apply the migrations not run yet). Safe to call
        twice, and from several processes at once (they take turns on a transaction lock)."""
        s = sql.Identifier(self.schema)
        with self.connection("setup") as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {s}").format(s=s))
            conn.execute(sql.SQL(MIGRATIONS_TABLE).format(schema=s))
            table = sql.SQL("{s}.jsonl_store_migrations").format(s=s)
            done = {v for (v,) in conn.execute(sql.SQL("SELECT v FROM {t}").format(t=table))}
            for v, stmt in enumerate(MIGRATIONS):
                if v not in done:
                    conn.execute(sql.SQL(stmt).format(schema=s))
                    conn.execute(sql.SQL("INSERT INTO {t} (v) VALUES (%s)").format(t=table), (v,))

    def migrations_run(self) -> set[int]:
        """Which of `MIGRATIONS` this database has (empty when the store's tables are missing)."""
        with self.connection("reading the schema version") as conn:
            found = conn.execute("SELECT to_regclass(%s)", (f'"{self.schema}".jsonl_store_migrations',)).fetchone()
            if found is None or found[0] is None:
                return set()
            table = sql.SQL("{s}.jsonl_store_migrations").format(s=sql.Identifier(self.schema))
            return {int(v) for (v,) in conn.execute(sql.SQL("SELECT v FROM {t}").format(t=table))}

    @cached_property
    def blobs(self) -> PostgresBlobStore:
        """The store's blobs: rows of `jsonl_blobs` over the same pool."""
        return PostgresBlobStore(self)

    def session(self, tenant: str, thread: str, fsync: FsyncPolicy) -> PostgresSessionStreams:
        """The rows of session (tenant, thread)."""
        if "\x00" in thread:
            raise InvalidIdError(f"invalid thread_id {thread[:40]!r}: PostgreSQL text cannot hold NUL")
        return PostgresSessionStreams(self, tenant, thread, fsync)

    def threads(self, tenant: str | None = None, thread: str | None = None) -> list[tuple[str, str]]:
        """Sessions holding a run stream (as the `files` store lists sessions with a runs folder)."""
        with self.connection("listing threads") as conn:
            rows = conn.execute(self.q["threads"], (tenant, tenant, thread, thread)).fetchall()
        return [(str(t), str(n)) for t, n in rows]

    def clock(self) -> float:
        """The server's time (unix seconds): what its rows' times are in."""
        with self.connection("reading the clock") as conn:
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
        assert row is not None
        return float(row[0])

    def logged(self, tenant: str) -> list[str]:
        """The tenant's sessions that have an event log (stream `@events`), by id."""
        return self.holding(tenant, EVENTS)

    def holding(self, tenant: str, run: str) -> list[str]:
        """The tenant's sessions that hold stream `run` (a session stream such as `@outbox`), by id."""
        with self.connection("listing sessions") as conn:
            return [str(t) for (t,) in conn.execute(self.q["holding"], (tenant, run))]

    def outbox_holders(self, tenant: str | None = None) -> list[tuple[str, str]]:
        """(tenant, session) of every session of `tenant` (None: of every tenant) that holds an
        `@outbox` stream, sorted (one read of the partial index `jsonl_streams_outbox`)."""
        with self.connection("listing sessions") as conn:
            if tenant is not None:
                return [(tenant, str(th)) for (th,) in conn.execute(self.q["outbox_holding"], (tenant,))]
            return [(str(t), str(th)) for (t, th) in conn.execute(self.q["outbox_holders"])]

    def doc_tenants(self, thread: str, name: str) -> list[str]:
        """The tenants whose session `thread` has document row `name`."""
        with self.connection("listing documents") as conn:
            return [str(t) for (t,) in conn.execute(self.q["doc_tenants"], (thread, name))]

    def reserve(self, tenant: str, key: str, value: dict[str, Any]) -> dict[str, Any] | None:
        """Insert the reservation row unless one exists (one synchronous statement)."""
        with self.connection("reserving an id") as conn:
            if conn.execute(self.q["reserve"], (tenant, key, encode_record(value))).fetchone() is not None:
                return None
        try:
            return self.reserved(tenant, key) or {}
        except CorruptRecordError:
            return {}

    def reserved(self, tenant: str, key: str) -> dict[str, Any] | None:
        """The reservation row's record, verified (named `.../tenants/<tenant>/turns/<key>.json`)."""
        with self.connection("reading a reservation") as conn:
            row = conn.execute(self.q["reserved"], (tenant, key)).fetchone()
        if row is None:
            return None
        return decode_file(Path(f"{self.label}/tenants/{tenant}/turns/{key}.json"), bytes(row[0]))

    def unreserve(self, tenant: str, key: str | None = None) -> int:
        """Delete the reservation row of `key` (None: every one of the tenant); how many went."""
        with self.connection("deleting reservations") as conn:
            return conn.execute(self.q["unreserve"], (tenant, key, key)).rowcount

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()
