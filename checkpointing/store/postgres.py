"""The `postgres` store: the saver's records as rows of PostgreSQL tables (psycopg 3).

    store = PostgresStore("postgresql://postgres@127.0.0.1:5432/test")
    store.setup()                                   # creates the tables if missing
    saver = JsonlCheckpointSaver(store=store)       # or JsonlCheckpointSaver.from_url(url)

A record row holds the record exactly as its JSONL line (checksum and newline included) at its
byte position in the run's stream, so a stream's rows in order are the `files` store's
`checkpoints.jsonl`, byte for byte (tables: `pg_schema`). A session stream (`base.SESSION_STREAMS`:
the event log's `@events`, never a run id) is a stream row too, its rows the lines of its file on
the `files` store (`events.jsonl`); listings of runs and threads skip it.

- An append is one statement, so one transaction and one round trip (`jsonl_append`, a function
  of the schema: its plans are cached by the server process, nothing is prepared by the client),
  and it writes nothing but its lines. The lease token is checked against the session's fence row,
  which it locks (`FOR SHARE`, until commit: a new owner raising the fence waits for it) and
  rewrites only when the token advances; the stream row is locked too (`FOR KEY SHARE`: a rewrite
  of the stream waits for it), or created. The stream ends where its last row ends: the lines go
  there, and two appends racing for that end collide on the rows' key (one fails whole, and is run
  again from the new end), so positions follow commit order with no gaps. A stale token changes
  nothing. A connection lost midway leaves nothing of that append. With fsync "batch", and for
  pending writes under fsync "checkpoint", the commit does not wait for the WAL flush
  (`synchronous_commit` off for that transaction): the next synchronous commit that writes (the
  superstep's checkpoint, or `sync`, which locks those streams' rows and checks their ends) makes
  them durable together. A server crash before that loses them: `sync` then raises rather than
  report them durable.
- A conditional append (`append_if`, the inbox's) is one transaction that locks the stream row
  (`SELECT ... FOR UPDATE`, so no append is in flight), reads its end, compares it and inserts the
  lines: a row lock, so it works behind PgBouncer's transaction pooling where a session advisory
  lock would not.
- The saver's index of a stream is kept as a document row (`indexfile`'s framed line, checked
  against the stream before use, dropped when the stream is rewritten), so a new process opening a
  long thread reads only the rows past it.
- Every read verifies each row's checksum; a row that fails is `CorruptRecordError` (the saver's:
  `CorruptCheckpointError`) naming the stream and its line: `postgresql:<db>/<schema>/tenants/<t>/
  sessions/<thread>/runs/<run>`, or `.../sessions/<thread>/events.jsonl` for the event log.
- Every id is a bound parameter; statements are composed only with the schema's identifier.
  Nothing session-scoped (no advisory session locks, no prepared statements:
  `prepare_threshold=None`), so it works behind PgBouncer in transaction pooling mode.
- Connections come from a `psycopg_pool.ConnectionPool` (thread-safe).
- Blobs (large payloads) are rows too: `store.blobs` (`pg_blobs.PostgresBlobStore`), so a session
  needs nothing but the database.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any, NoReturn

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from checkpointing import indexfile
from checkpointing.commit_group import CommitGroup
from checkpointing.exceptions import (
    CorruptCheckpointError,
    CorruptRecordError,
    InvalidIdError,
    StaleFencingTokenError,
    StoreUnavailableError,
)
from checkpointing.indexfile import Snapshot
from checkpointing.layout import EVENTS_FILE, INBOX_FILE, JOURNAL_FILE, OUTBOX_FILE, folder_name
from checkpointing.record_log import Durable
from checkpointing.records import FsyncPolicy, Scan, decode_file, encode_record, record_crc, scan_bytes
from checkpointing.store.base import EVENTS, INBOX, JOURNAL, OUTBOX, is_session_stream, served_file
from checkpointing.store.pg_blobs import PostgresBlobStore
from checkpointing.store.pg_queries import QUERIES
from checkpointing.store.pg_schema import MIGRATIONS, MIGRATIONS_TABLE, SETUP_LOCK, schema_name
from checkpointing.verify import FileReport, Repair

log = logging.getLogger(__name__)
_SESSION_NAMES = {EVENTS: EVENTS_FILE, JOURNAL: JOURNAL_FILE, INBOX: INBOX_FILE, OUTBOX: OUTBOX_FILE}
"""How each session stream is named in messages (its file's name on the `files` store)."""


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
            kwargs={"autocommit": True, "prepare_threshold": None},
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
            raise StoreUnavailableError(
                f"{self.name}: {what} failed, PostgreSQL is unreachable or the connection was lost ({err}). "
                "A write in progress was committed whole or not at all: read the thread again and retry."
            ) from err

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


class PostgresSessionStreams:
    """The rows of one session (see the module docstring)."""

    persists_index = True
    group: CommitGroup | None = None
    """Each commit is durable on its own: there is no group to hold."""

    def __init__(self, store: PostgresStore, tenant: str, thread: str, fsync: FsyncPolicy) -> None:
        self.store = store
        self.q = store.q
        self.tenant = tenant
        self.thread = thread
        self.fsync = fsync
        self.key = f"{store.name}#{tenant}/{thread}"
        self.label = Path(f"{store.label}/tenants/{tenant}/sessions/{folder_name(thread)}/runs")
        self._ids: dict[str, int] = {}
        self._unflushed: dict[str, tuple[int, int]] = {}
        """Streams appended to by commits that did not wait for the WAL flush: run -> (stream
        row id, the stream's end after the last such append)."""

    def path(self, run: str) -> Path:
        """The stream's name in messages."""
        if not is_session_stream(run):
            return self.label / run
        served = served_file(run)
        if served is not None:
            return self.label.parent / served
        if run not in _SESSION_NAMES:
            raise ValueError(f"unknown session stream {run!r}; use one of {sorted(_SESSION_NAMES)}")
        return self.label.parent / _SESSION_NAMES[run]

    def heads(self) -> dict[str, tuple[int, int]]:
        """Every run stream: (end position, row id)."""
        with self.store.connection("reading the session's streams") as conn:
            rows = conn.execute(self.q["heads"], (self.tenant, self.thread)).fetchall()
        self._ids = {str(run): int(sid) for run, sid, _ in rows}
        return {str(run): (int(end), int(sid)) for run, sid, end in rows}

    def head(self, run: str) -> tuple[int, int]:
        """The stream's (end position, row id), (0, 0) when there is no row."""
        self.path(run)  # an unknown session stream is refused before any query
        with self.store.connection("reading a stream's head") as conn:
            row = conn.execute(self.q["head"], (self.tenant, self.thread, run)).fetchone()
        if row is None:
            self._ids.pop(run, None)
            return 0, 0
        sid = self._ids[run] = int(row[0])
        return int(row[1]), sid

    def create(self, run: str, frames: list[bytes], policy: FsyncPolicy | None) -> bool:
        """One synchronous transaction: the stream row and its lines; False when the row exists."""
        offs, _ = _offsets(frames)
        self.path(run)  # an unknown session stream is refused before any query
        with self.store.connection("creating a stream") as conn, conn.transaction():
            row = conn.execute(self.q["create"], (self.tenant, self.thread, run)).fetchone()
            if row is None:
                return False
            conn.execute(self.q["insert"], (int(row[0]), offs, frames))
        self._ids[run] = int(row[0])
        return True

    def _id(self, run: str) -> int | None:
        sid = self._ids.get(run)
        if sid is None:
            with self.store.connection("reading the session's streams") as conn:
                row = conn.execute(self.q["stream_id"], (self.tenant, self.thread, run)).fetchone()
            if row is not None:
                sid = self._ids[run] = int(row[0])
        return sid

    def scan(self, run: str, start: int = 0, first_line: int = 1) -> Scan:
        """The stream's rows from `start`, each verified: a row that fails its checksum, has no
        newline, or leaves a gap is `CorruptRecordError` naming the stream and line."""
        path = self.path(run)
        out = Scan(path, size=start, good=start)
        sid = self._id(run)
        if sid is None:
            return out
        with self.store.connection("reading a stream") as conn:
            rows = conn.execute(self.q["scan"], (sid, start)).fetchall()
        line = first_line
        for pos, raw in rows:
            raw = bytes(raw)
            if pos != out.good:
                raise CorruptRecordError(str(path), line, f"no record at byte {out.good} (the next row is at {pos})")
            if not raw.endswith(b"\n"):
                raise CorruptRecordError(str(path), line, f"the row at byte {pos} has no terminating newline")
            one = scan_bytes(path, raw, pos, line)  # raises naming the line when it does not verify
            if len(one.records) != 1:
                raise CorruptRecordError(str(path), line, f"the row at byte {pos} is not one record")
            out.records.append(one.records[0])
            out.good = out.size = pos + len(raw)
            line += 1
        return out

    def read_at(self, run: str, offsets: list[int]) -> list[bytes]:
        """The rows at `offsets` (b"" where none is)."""
        sid = self._id(run)
        if sid is None:
            return [b""] * len(offsets)
        with self.store.connection("reading records") as conn:
            rows = conn.execute(self.q["read"], (sid, list(offsets))).fetchall()
        found = {int(pos): bytes(raw) for pos, raw in rows}
        return [found.get(off, b"") for off in offsets]

    def _fence(self, conn: psycopg.Connection[Any], token: int) -> None:
        if conn.execute(self.q["fence"], (self.tenant, self.thread, token)).fetchone() is None:
            self._refuse(conn, token)

    def _refuse(self, conn: psycopg.Connection[Any], token: int) -> NoReturn:
        row = conn.execute(self.q["fence_get"], (self.tenant, self.thread)).fetchone()
        raise StaleFencingTokenError(
            f"{self.label.parent}: write with lease token {token} refused, token {row[0] if row else '?'} "
            "was already granted to a newer owner. This process lost the session lease (paused or cut "
            "off past its TTL); stop writing and let the new owner continue."
        )

    def append(
        self, run: str, frames: list[bytes], policy: FsyncPolicy | None, token: int | None
    ) -> tuple[list[int], int, Durable | None]:
        """One statement (its own transaction): check the fence, lock (or create) the stream, insert
        the lines at its end; refused whole by a stale `token`."""
        offs, rel = _offsets(frames)
        quick = (policy or self.fsync) != "always"
        args = (self.tenant, self.thread, run, token, frames[0], frames[1:] or None, quick)
        with self.store.connection("appending records") as conn:
            for attempt in itertools.count(1):
                try:
                    row = conn.execute(self.q["append"], args).fetchone()
                    break
                except psycopg.errors.UniqueViolation:
                    # Another append to this stream committed at the end this one read: read it again.
                    if attempt >= _RETRIES:
                        raise
            if row is None or row[0] is None:  # only a stale token appends nothing
                assert token is not None
                self._refuse(conn, token)
        sid, start = int(row[0]), int(row[1])
        if quick:
            self._unflushed[run] = (sid, start + rel)
        self._ids[run] = sid
        return [start + off for off in offs], sid, None

    def append_if(self, run: str, frames: list[bytes], expect_end: int) -> list[int] | None:
        """One synchronous transaction: lock the stream row (`FOR UPDATE`), compare its end with
        `expect_end` and insert the lines there; None, nothing written, when it moved."""
        offs, _ = _offsets(frames)
        self.path(run)  # an unknown session stream is refused before any query
        key = (self.tenant, self.thread, run)
        with self.store.connection("appending records") as conn, conn.transaction():
            row = conn.execute(self.q["head_lock"], key).fetchone()
            if row is None:
                row = None if expect_end else conn.execute(self.q["create"], key).fetchone()
                if row is None:  # it exists now (another writer created it): its end moved
                    return None
                start = 0
            else:  # the row is locked: no append holds it any more, this statement sees them all
                start = _one(conn.execute(self.q["end"], (int(row[0]),)).fetchone())
                if start != expect_end:
                    return None
            sid = int(row[0])
            conn.execute(self.q["insert"], (sid, [start + off for off in offs], frames))
        self._ids[run] = sid
        return [start + off for off in offs]

    def replace(self, run: str, frames: list[bytes]) -> None:
        """One transaction: drop the stream, create it again (a new identity) with `frames`."""
        key = (self.tenant, self.thread, run)
        self._unflushed.pop(run, None)
        with self.store.connection("rewriting a stream") as conn, conn.transaction():
            _drop(conn, self.q, "drop_run", key)
            conn.execute(self.q["doc_drop"], (self.tenant, self.thread, _index_doc(run)))
            self._ids.pop(run, None)
            if not frames:
                return
            offs, _ = _offsets(frames)
            row = conn.execute(self.q["create"], key).fetchone()
            assert row is not None
            conn.execute(self.q["insert"], (int(row[0]), offs, frames))

    def replace_if(self, run: str, frames: list[bytes], expect_end: int) -> bool:
        """`replace`, in one transaction, only while the stream ends at `expect_end` (its row locked
        `FOR UPDATE`, so no append slips in between); False, nothing changed, when it moved."""
        key = (self.tenant, self.thread, run)
        with self.store.connection("rewriting a stream") as conn, conn.transaction():
            row = conn.execute(self.q["head_lock"], key).fetchone()
            if (_one(conn.execute(self.q["end"], (int(row[0]),)).fetchone()) if row is not None else 0) != expect_end:
                return False
            _drop(conn, self.q, "drop_run", key)
            self._ids.pop(run, None)
            if frames:
                offs, _ = _offsets(frames)
                made = conn.execute(self.q["create"], key).fetchone()
                assert made is not None
                conn.execute(self.q["insert"], (int(made[0]), offs, frames))
        return True

    def remove(self) -> None:
        """One transaction: the session's streams (their records cascade), documents and fence."""
        key = (self.tenant, self.thread)
        self._unflushed.clear()
        with self.store.connection("deleting a thread") as conn, conn.transaction():
            _drop(conn, self.q, "drop_streams", key)
            for q in ("drop_docs", "drop_fence"):
                conn.execute(self.q[q], key)
        self._ids.clear()

    def load_doc(self, name: str) -> tuple[dict[str, Any] | None, Any]:
        """The document row (one framed line, verified) and its version."""
        with self.store.connection("reading a document") as conn:
            row = conn.execute(self.q["doc"], (self.tenant, self.thread, name)).fetchone()
        if row is None:
            return None, None
        path = self.label.parent / name
        try:
            return decode_file(path, bytes(row[0])), int(row[1])
        except CorruptRecordError as err:
            raise CorruptCheckpointError(err.path, err.line, err.reason) from err

    def save_doc(self, name: str, doc: dict[str, Any], expect: Any) -> bool:
        """Insert (`expect` None) or update the row if still at version `expect`."""
        body = encode_record(doc)
        with self.store.connection("writing a document") as conn:
            if expect is None:
                row = conn.execute(self.q["doc_new"], (self.tenant, self.thread, name, body)).fetchone()
            else:
                row = conn.execute(self.q["doc_cas"], (body, self.tenant, self.thread, name, expect)).fetchone()
        return row is not None

    def create_doc(self, name: str, body: bytes) -> bool:
        """Insert the document row with exactly `body` (one framed line, newline included: the
        bytes its file holds on the `files` store); False, nothing written, when the row exists."""
        decode_file(self.label.parent / name, body)  # a body that does not verify is refused
        with self.store.connection("writing a document") as conn:
            row = conn.execute(self.q["doc_new"], (self.tenant, self.thread, name, body)).fetchone()
        return row is not None

    def delete_doc(self, name: str) -> None:
        """Delete the document row."""
        with self.store.connection("deleting a document") as conn:
            conn.execute(self.q["doc_drop"], (self.tenant, self.thread, name))

    def advance_fence(self, token: int) -> None:
        """Raise the session's fence to `token`, or refuse a stale one."""
        with self.store.connection("checking the fence") as conn, conn.transaction():
            self._fence(conn, token)

    def dump(self) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """Every stream's rows concatenated, as stored (not verified: the bytes its file would
        hold), and every document's body: ({stream: bytes}, {document: bytes})."""
        with self.store.connection("copying a session") as conn:
            streams = conn.execute(self.q["streams_all"], (self.tenant, self.thread)).fetchall()
            out: dict[str, bytes] = {}
            for run, sid in streams:
                rows = conn.execute(self.q["scan"], (sid, 0)).fetchall()
                out[str(run)] = b"".join(bytes(line) for _, line in rows)
            docs = {str(n): bytes(b) for n, b in conn.execute(self.q["docs_all"], (self.tenant, self.thread))}
        return out, docs

    def has_rows(self) -> bool:
        """Whether the session has any stream or document row (the fence row aside)."""
        with self.store.connection("reading the session's streams") as conn:
            row = conn.execute(self.q["any_rows"], {"t": self.tenant, "th": self.thread}).fetchone()
        return bool(row and row[0])

    def highest_fence(self) -> int | None:
        """The highest lease token the session's fence recorded (None: none yet)."""
        with self.store.connection("reading the fence") as conn:
            row = conn.execute(self.q["fence_get"], (self.tenant, self.thread)).fetchone()
        return int(row[0]) if row else None

    def load_index(self, run: str) -> Snapshot | None:
        """The index row of stream `run` (`indexfile`'s framed line) if it still describes the
        stream: the lines it names are there, intact, with the checksums it recorded."""
        name = _index_doc(run)
        with self.store.connection("reading a stream's index") as conn:
            row = conn.execute(self.q["doc"], (self.tenant, self.thread, name)).fetchone()
        if row is None:
            return None
        path = self.path(run)
        saved = indexfile.decode(self.label.parent / name, bytes(row[0]), path)
        if saved is None:
            return None
        offs = [saved.last, *(off for off, _ in saved.probes)]
        lines = self.read_at(run, sorted(set(offs)))
        at = dict(zip(sorted(set(offs)), lines, strict=True))
        if not indexfile.line_is(path, at[saved.last], saved.crc, saved.end - saved.last):
            return None  # stale: the stream was rewritten since (nothing is wrong)
        if not all(indexfile.line_is(path, at[off], crc) for off, crc in saved.probes):
            return None
        return Snapshot(saved.end, saved.lines, saved.state)

    def save_index(
        self, run: str, cover: tuple[int, int, int, str], state: dict[str, Any], probes: list[tuple[int, str]]
    ) -> None:
        """Upsert the stream's index row (a cache: no compare-and-swap, a failure only logged)."""
        end, lines, last, crc = cover
        body = indexfile.encode(end, lines, last, crc, state, probes)
        try:
            with self.store.connection("saving a stream's index") as conn:
                conn.execute(self.q["doc_put"], (self.tenant, self.thread, _index_doc(run), body))
        except StoreUnavailableError as err:
            log.debug("index of %s not saved: %s", self.path(run), err)

    def crc_at(self, run: str, offset: int) -> str:
        """The checksum field of the row at `offset`."""
        return record_crc(self.read_at(run, [offset])[0])

    def sync(self, run: str | None = None) -> None:
        """After commits that did not wait for the WAL flush: one that does, and that checks they
        are still there. A commit flushes the WAL (all of it before its own record, so every
        stream's, `run` or not) only when its transaction wrote some: so it locks each such stream's
        row (a row lock is written to the WAL), and reads back the stream's end. A server that crashed since lost
        the commits it had not flushed: a stream that no longer ends where this process's appends
        left it is `StoreUnavailableError`, never a silent success."""
        if not self._unflushed:
            return
        with self.store.connection("flushing") as conn, conn.transaction():
            for name, (sid, end) in self._unflushed.items():
                row = conn.execute(self.q["touch"], (sid,)).fetchone()
                if row is None or int(row[1]) < end:
                    raise StoreUnavailableError(
                        f"{self.path(name)}: records this process wrote are gone (the stream ends at byte "
                        f"{row[1] if row else 0}, it had {end}): the database lost commits it had not flushed "
                        "yet (it crashed or failed over); nothing was half-written"
                    )
        self._unflushed.clear()

    held = False
    """Never: each commit is durable on its own (`hold` defers nothing)."""

    def hold(self) -> None:
        """Nothing to defer: each commit is durable on its own."""

    def release(self) -> None:
        """Nothing was deferred."""

    def commit(self, run: str) -> None:
        """`sync(run)`: the commits that did not wait for the WAL flush are flushed and checked."""
        self.sync(run)

    def close(self) -> None:
        """Nothing is held between calls (connections go back to the pool)."""

    def forget(self, run: str) -> None:
        """Drop what this object remembers of stream `run` (its row id), after it was cut."""
        self._ids.pop(run, None)
        self._unflushed.pop(run, None)

    def verify(self) -> list[FileReport]:
        """`checkpointing.store.verify_ops.verify_rows`: every stream and document, verified."""
        from checkpointing.store.verify_ops import verify_rows

        return verify_rows(self)

    def repair(self, report: FileReport, fence_floor: int = 0) -> Repair | None:
        """`checkpointing.store.verify_ops.repair_rows` (the fence is a row without a checksum:
        `fence_floor` is never needed here)."""
        from checkpointing.store.verify_ops import repair_rows

        return repair_rows(self, report)


_RETRIES = 100
"""Appends to one stream that may collide on its end before one gives up (each collision means
another append committed meanwhile: progress)."""


def _one(row: Any) -> int:
    assert row is not None
    return int(row[0])


def _drop(conn: psycopg.Connection[Any], q: dict[str, bytes], which: str, key: tuple[str, ...]) -> None:
    """Delete streams (`drop_run`, `drop_streams`), then their records: two statements, so that the
    second sees the rows of every append that held a stream row while the first waited for it."""
    ids = [int(sid) for (sid,) in conn.execute(q[which], key)]
    if ids:
        conn.execute(q["drop_records"], (ids,))


def _offsets(frames: list[bytes]) -> tuple[list[int], int]:
    """Where each of `frames` starts relative to the first; their total length."""
    starts = [0, *itertools.accumulate(len(f) for f in frames)]
    return starts[:-1], starts[-1]


def _index_doc(run: str) -> str:
    """The document holding the persisted index of stream `run` (its index file's path on the
    `files` store, relative to the session folder: never a document of an id's name)."""
    if not is_session_stream(run):
        return f"runs/{run}/checkpoints.jsonl.idx"
    return f"{served_file(run) or _SESSION_NAMES[run]}.idx"
