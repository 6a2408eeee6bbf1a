"""A PostgreSQL session's streams: appends, scans and rewrites of rows of `jsonl_records`.

- An append is one statement, so one transaction and one round trip (`CALL jsonl_append`, a
  procedure of the schema: its plans are cached by the server process, nothing is prepared by the
  client), and it writes nothing but its lines. It holds the session's transaction-scoped
  advisory lock shared (`pg_schema.SESSION_LOCK`: no row is locked, nothing is written but the
  lines), checks the lease token against the session's fence row and finds (or creates) the
  stream row. Raising the fence (`advance_fence`, or an append whose token is newer than the
  fence's) and rewriting or deleting streams take that lock exclusive first: they wait for the
  appends in flight, and the appends that wait for them then read what they wrote. The stream
  ends where its last row ends: the lines go there, and two appends racing for that end collide
  on the rows' key (one fails whole, and is run again from the new end), so positions follow
  commit order with no gaps. A stale token changes nothing. A connection lost midway leaves
  nothing of that append. With fsync "batch", and for pending writes under fsync "checkpoint",
  the commit does not wait for the WAL flush (`synchronous_commit` off for that transaction): the
  next synchronous commit that writes (the superstep's checkpoint, or `sync`, which locks those
  streams' rows and checks their ends) makes them durable together. A server crash before that
  loses them: `sync` then raises rather than report them durable.
- A one-line append at the end this object's own last append left (or `head` read) is `CALL
  jsonl_append_at` instead, under the same lock: it checks that the stream's last row ends there
  and that the fence is at the token, and inserts the line there (no stream to find by name, no
  row to send back). A stream appended to by another writer, cut, rewritten or dropped since, or a
  fence that moved, fails the check: nothing is written and the append runs as above. One-line
  appends go to libpq as they are (`pg_libpq`), not through psycopg's adaptation.
- A conditional append (`append_if`, the inbox's) is one transaction that locks the stream row
  (`SELECT ... FOR UPDATE`, so no other conditional append or rewrite is in flight), reads its
  end, compares it and inserts the lines; a plain append in flight that read the same end
  collides with them on the rows' key, and one of the two fails whole. Row and transaction-scoped
  locks only, so it works behind PgBouncer's transaction pooling where a session advisory lock
  would not.
- Every read verifies each row's checksum; a row that fails is `CorruptRecordError` (the saver's:
  `CorruptCheckpointError`) naming the stream and its line: `postgresql:<db>/<schema>/tenants/<t>/
  sessions/<thread>/runs/<run>`, or `.../sessions/<thread>/events.jsonl` for the event log.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import psycopg

from checkpointing.commit_group import CommitGroup
from checkpointing.exceptions import CorruptRecordError, StaleFencingTokenError, StoreUnavailableError
from checkpointing.layout import folder_name
from checkpointing.record_log import Durable
from checkpointing.records import FsyncPolicy, Scan, scan_bytes
from checkpointing.store import pg_libpq
from checkpointing.store.pg_docs import PostgresSessionDocs, _index_doc
from checkpointing.verify import FileReport, Repair

if TYPE_CHECKING:
    from checkpointing.store.postgres import PostgresStore


class PostgresSessionStreams(PostgresSessionDocs):
    """The rows of one session (see the module docstring); its documents and index rows:
    `pg_docs.PostgresSessionDocs`."""

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
        self._key = (tenant.encode(), thread.encode())
        """Tenant and thread as the connection's encoding (UTF-8, `PostgresStore`) spells them."""
        self.label = Path(f"{store.label}/tenants/{tenant}/sessions/{folder_name(thread)}/runs")
        self._ids: dict[str, int] = {}
        self._ends: dict[str, tuple[int, int]] = {}
        """Streams this object appended to: run -> (stream row id, where its last append ended); the
        next one-line append goes there (`jsonl_append_at` checks it, so a stale one costs a retry)."""
        self._unflushed: dict[str, tuple[int, int]] = {}
        """Streams appended to by commits that did not wait for the WAL flush: run -> (stream
        row id, the stream's end after the last such append)."""

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
            self._ends.pop(run, None)
            return 0, 0
        sid, end = int(row[0]), int(row[1])
        self._ids[run] = sid
        if end:  # where the next append of this object goes, unless another writer's goes first
            self._ends[run] = (sid, end)
        return end, sid

    def create(self, run: str, frames: list[bytes], policy: FsyncPolicy | None) -> bool:
        """One synchronous transaction: the stream row and its lines; False when the row exists."""
        offs, rel = _offsets(frames)
        self.path(run)  # an unknown session stream is refused before any query
        with self.store.connection("creating a stream") as conn, conn.transaction():
            row = conn.execute(self.q["create"], (self.tenant, self.thread, run)).fetchone()
            if row is None:
                return False
            conn.execute(self.q["insert"], (int(row[0]), offs, frames))
        self._ids[run] = int(row[0])
        if rel:
            self._ends[run] = (int(row[0]), rel)
        return True

    def scan(self, run: str, start: int = 0, first_line: int = 1, limit: int | None = None) -> Scan:
        """The stream's rows from `start`, each verified: a row that fails its checksum, has no
        newline, or leaves a gap is `CorruptRecordError` naming the stream and line. Every row
        from `start` is returned whatever `limit` (the rows are fetched together)."""
        path = self.path(run)
        out = Scan(path, size=start, good=start)
        sid = self._id(run)
        if sid is None:
            return out
        with self.store.connection("reading a stream") as conn:
            rows = conn.execute(self.q["scan"], (sid, start)).fetchall()
            if not rows and start == 0:
                # Nothing under the id kept: the stream may have been dropped and made again since
                # (rewritten, or its session renewed, by another process): look its id up again.
                self._ids.pop(run, None)
                row = conn.execute(self.q["stream_id"], (self.tenant, self.thread, run)).fetchone()
                if row is not None and int(row[0]) != sid:
                    sid = self._ids[run] = int(row[0])
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

    def _fence(self, conn: psycopg.Connection[Any], token: int) -> None:
        key = (self.tenant, self.thread)
        if conn.execute(self.q["fence"], (*key, *key, token)).fetchone() is None:
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
        """One statement (its own transaction): check the fence, find (or create) the stream, insert
        the lines at its end; refused whole by a stale `token`. A fence not at `token` yet is
        raised first (a statement of its own), then the append runs again. One line at the end
        this object's last append left: `jsonl_append_at` there (checked; `jsonl_append` when it
        does not hold)."""
        quick = (policy or self.fsync) != "always"
        one = len(frames) == 1
        offs, rel = ([0], len(frames[0])) if one else _offsets(frames)
        at = self._ends.get(run) if one else None
        conn = self.store.getconn("appending records")
        try:
            if at is not None and pg_libpq.append_at(conn, self.q["append_at"], self._at(at, frames[0], token, quick)):
                sid, start = at
            else:
                sid, start = self._append(conn, run, frames, token, quick)
        except (psycopg.OperationalError, psycopg.InterfaceError) as err:
            raise self.store.lost("appending records", err) from err
        finally:
            self.store.pool.putconn(conn)
        end = self._ends[run] = (sid, start + rel)
        if quick:
            self._unflushed[run] = end
        self._ids[run] = sid
        return ([start] if one else [start + off for off in offs]), sid, None

    def _at(self, at: tuple[int, int], line: bytes, token: int | None, quick: bool) -> list[Any]:
        tok = None if token is None else b"%d" % token
        return [self._key[0], self._key[1], tok, b"%d" % at[0], b"%d" % at[1], line, b"t" if quick else b"f"]

    def _append(
        self, conn: psycopg.Connection[Any], run: str, frames: list[bytes], token: int | None, quick: bool
    ) -> tuple[int, int]:
        """`jsonl_append`: (stream id, start); the fence raised first when it is not at `token`."""
        if len(frames) == 1:  # its parameters as libpq takes them (`pg_libpq`)
            tok = None if token is None else b"%d" % token
            args: list[Any] = [self._key[0], self._key[1], run.encode(), tok, frames[0], None, b"t" if quick else b"f"]
        else:
            args = [self.tenant, self.thread, run, token, frames[0], frames[1:], quick]
        row = self._call(conn, args)
        if row[0] is None:  # the fence is not at `token`: raise it, or refuse
            assert token is not None
            self._fence(conn, token)
            row = self._call(conn, args)
            if row[0] is None:  # a newer owner raised it meanwhile
                self._refuse(conn, token)
        return int(row[0]), int(row[1])

    def _call(self, conn: psycopg.Connection[Any], args: list[Any]) -> tuple[Any, Any]:
        """`jsonl_append`'s (stream id, start), (None, None) when the fence is not at the token."""
        for attempt in itertools.count(1):
            try:
                if isinstance(args[0], bytes):
                    return pg_libpq.append(conn, self.q["append_now"], args)
                row = conn.execute(self.q["append"], args).fetchone()
                return (None, None) if row is None else (row[0], row[1])
            except psycopg.errors.UniqueViolation:
                # Another append to this stream committed at the end this one read: read it again.
                if attempt >= _RETRIES:
                    raise
        raise AssertionError("unreachable")

    def append_if(self, run: str, frames: list[bytes], expect_end: int) -> list[int] | None:
        """One synchronous transaction: lock the stream row (`FOR UPDATE`), compare its end with
        `expect_end` and insert the lines there; None, nothing written, when it moved (an append
        in flight that read the same end collides with these lines on the rows' key: one fails)."""
        offs, rel = _offsets(frames)
        self.path(run)  # an unknown session stream is refused before any query
        key = (self.tenant, self.thread, run)
        try:
            sid = self._append_if(key, offs, frames, expect_end)
        except psycopg.errors.UniqueViolation:
            return None
        if sid is None:
            return None
        self._ids[run] = sid
        self._ends[run] = (sid, expect_end + rel)
        return [expect_end + off for off in offs]

    def _append_if(
        self, key: tuple[str, str, str], offs: list[int], frames: list[bytes], expect_end: int
    ) -> int | None:
        with self.store.connection("appending records") as conn, conn.transaction():
            row = conn.execute(self.q["head_lock"], key).fetchone()
            if row is None:
                row = None if expect_end else conn.execute(self.q["create"], key).fetchone()
                if row is None:  # it exists now (another writer created it): its end moved
                    return None
                start = 0
            else:  # the row is locked: no other conditional append or rewrite is in flight
                start = _one(conn.execute(self.q["end"], (int(row[0]),)).fetchone())
                if start != expect_end:
                    return None
            conn.execute(self.q["insert"], (int(row[0]), [start + off for off in offs], frames))
        return int(row[0])

    def replace(self, run: str, frames: Iterable[bytes]) -> None:
        """One transaction: drop the stream, create it again (a new identity) with `frames`."""
        rows = list(frames)  # one insert of every row: consumed before the transaction begins
        key = (self.tenant, self.thread, run)
        self._unflushed.pop(run, None)
        with self.store.connection("rewriting a stream") as conn, conn.transaction():
            conn.execute(self.q["lock_session"], key[:2])
            _drop(conn, self.q, "drop_run", key)
            conn.execute(self.q["doc_drop"], (self.tenant, self.thread, _index_doc(run)))
            self._ids.pop(run, None)
            self._ends.pop(run, None)
            if not rows:
                return
            offs, _ = _offsets(rows)
            row = conn.execute(self.q["create"], key).fetchone()
            assert row is not None
            conn.execute(self.q["insert"], (int(row[0]), offs, rows))

    def replace_if(self, run: str, frames: list[bytes], expect_end: int) -> bool:
        """`replace`, in one transaction, only while the stream ends at `expect_end` (its row locked
        `FOR UPDATE`, so no append slips in between); False, nothing changed, when it moved."""
        key = (self.tenant, self.thread, run)
        with self.store.connection("rewriting a stream") as conn, conn.transaction():
            conn.execute(self.q["lock_session"], key[:2])
            row = conn.execute(self.q["head_lock"], key).fetchone()
            if (_one(conn.execute(self.q["end"], (int(row[0]),)).fetchone()) if row is not None else 0) != expect_end:
                return False
            _drop(conn, self.q, "drop_run", key)
            self._ids.pop(run, None)
            self._ends.pop(run, None)
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
            conn.execute(self.q["lock_session"], key)
            _drop(conn, self.q, "drop_streams", key)
            for q in ("drop_docs", "drop_fence"):
                conn.execute(self.q[q], key)
        self._ids.clear()
        self._ends.clear()

    def advance_fence(self, token: int) -> None:
        """Raise the session's fence to `token`, or refuse a stale one."""
        with self.store.connection("checking the fence") as conn, conn.transaction():
            self._fence(conn, token)

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
        self._ends.pop(run, None)
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
    second sees the rows of every conditional append that held a stream row while the first waited
    for it (the caller holds the session's lock exclusive: no plain append is in flight)."""
    ids = [int(sid) for (sid,) in conn.execute(q[which], key)]
    if ids:
        conn.execute(q["drop_records"], (ids,))


def _offsets(frames: list[bytes]) -> tuple[list[int], int]:
    """Where each of `frames` starts relative to the first; their total length."""
    starts = [0, *itertools.accumulate(len(f) for f in frames)]
    return starts[:-1], starts[-1]
