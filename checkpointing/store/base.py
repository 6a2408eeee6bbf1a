"""The store interface: where a session's checkpoint records live, in files or in PostgreSQL.

A `Store` holds sessions, keyed (tenant, thread). A session (`SessionStreams`) has

- append-only record streams: framed JSONL lines (`records.frame`, checksum included) at byte
  positions. Each run has one (`runs/<run>/checkpoints.jsonl`, named by its run id); the session
  has named session streams beside them (`SESSION_STREAMS`, named `@<name>`: `@` is outside the
  id alphabet of `checkpointing.ids`, so no run id can ever name one):

      EVENTS   "@events"    the session event log (`events.jsonl`, `checkpointing.entry_log`)
      JOURNAL  "@journal"   the tool execution journal (`journal.jsonl`, `agent.tools.journal`)
      INBOX    "@inbox"     turns submitted to the session (`inbox.jsonl`, `agent.session.inbox`)
      OUTBOX   "@outbox"    writes the SQL / Redis layers still owe (`outbox.jsonl`), reserved

  Every stream method takes either name (its `run` argument); `heads` lists run streams only.
  A stream has an identity that changes when it is replaced (the file's inode, a PostgreSQL row
  id), so a reader that indexed it knows to index it again;
- small documents (pins, the session document `session.json`) read and written whole, with
  compare-and-swap on their version;
- a fencing token: an append carrying a lease token lower than the highest one seen is refused,
  checked atomically with the append.
- durability, which the store owns: a client makes its stream durable with `commit(stream)`; a
  run holds its session while it is driven (`hold` / `release`), and on files the session's
  appends then wait for its commits, one fsync per file and step (`checkpointing.commit_group`,
  never touched by a client); on PostgreSQL each commit is durable on its own.

The store also holds the content-addressed blobs its sessions reference (`Store.blobs`), shared by
all sessions.

Positions are byte offsets in both backends (a row holds its line's offset in the stream), so the
rows of a stream concatenated are the file, byte for byte, and the saver's index works unchanged.
Reads verify every line's checksum: a damaged line (or row) raises `CorruptRecordError` (the
saver raises it again as `CorruptCheckpointError`) naming the stream (`path`) and line number;
only the files backend can have a torn tail (an incomplete last line), skipped by reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from checkpointing.blobs import Blobs
from checkpointing.commit_group import CommitGroup
from checkpointing.indexfile import Snapshot
from checkpointing.record_log import Durable
from checkpointing.records import FsyncPolicy, Scan
from checkpointing.verify import FileReport, Repair

DocVersion = Any
"""An opaque document version for compare-and-swap (None: the document does not exist)."""

SESSION_STREAM_PREFIX = "@"
"""Starts the name of every session stream (outside the id alphabet: never a run id)."""
EVENTS = "@events"
"""The session event log's stream."""
JOURNAL = "@journal"
"""The tool execution journal's stream (`agent.tools.journal.ToolExecutionJournal`)."""
INBOX = "@inbox"
"""The inbox's stream (`agent.session.inbox.Inbox.over`, appended with `append_if`)."""
OUTBOX = "@outbox"
"""The outbox's stream (`agent.session.outbox.StoreOutbox`)."""
SESSION_STREAMS = (EVENTS, JOURNAL, INBOX, OUTBOX)
"""Every session stream a store knows (a name outside this list is a run id)."""
SERVED_PREFIX = "@served/"
"""Starts the name of a served run's stream of API events (`served_stream`), one per run, kept by
an API server for replays: a session stream (never a run's checkpoints), file `served/<run>.jsonl`."""


def served_stream(run_id: str) -> str:
    """The name of the stream of API events an API server keeps for run `run_id`."""
    return f"{SERVED_PREFIX}{run_id}"


def served_file(name: str) -> str | None:
    """The path, relative to the session folder, of served stream `name` (None: not one)."""
    if not name.startswith(SERVED_PREFIX):
        return None
    run_id = name[len(SERVED_PREFIX) :]
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ValueError(f"not a run id: {run_id!r}")
    return f"served/{run_id}.jsonl"


def is_session_stream(name: str) -> bool:
    """Whether stream `name` is a session stream (else it is a run's)."""
    return name.startswith(SESSION_STREAM_PREFIX)


class SessionStreams(Protocol):
    """The record streams, documents and fence of one session (tenant, thread)."""

    tenant: str
    thread: str
    key: str
    """Names this session uniquely within its process (a folder, a PostgreSQL key)."""
    label: Path
    """Where the session's streams are, for messages (a folder, or `postgresql://…/<key>`)."""
    persists_index: bool
    """Whether the saver's index of a stream is kept beside it (`indexfile`'s framed line: a
    `.idx` file, an index row), so that a new process reads only the stream's tail."""
    group: CommitGroup | None
    """The session's commit group, the store's own: every stream of the session joins it (files).
    None when each append is durable on its own (a PostgreSQL commit). Clients never touch it:
    they ask `hold`, `release` and `commit`."""

    def path(self, run: str) -> Path:
        """The name of stream `run` (a run id or a session stream) in messages and errors (for
        files: its real path)."""
        ...

    def heads(self) -> dict[str, tuple[int, int]]:
        """Every run stream (never a session stream): run -> (end, identity); identity 0 when it
        has none (no file)."""
        ...

    def head(self, run: str) -> tuple[int, int]:
        """Stream `run`'s (end, identity), read now; (0, 0) when it does not exist."""
        ...

    def create(self, run: str, frames: list[bytes], policy: FsyncPolicy | None) -> bool:
        """Start stream `run` with `frames`, durable per `policy` (None: the store's) on return;
        False, nothing written, when the stream already holds lines (of two creators, one wins)."""
        ...

    def scan(self, run: str, start: int = 0, first_line: int = 1, limit: int | None = None) -> Scan:
        """The verified lines of stream `run` from position `start` (its line `first_line`); with
        `limit`, a store may return only the lines of about that many bytes (`Scan.size` then
        ends there: the caller scans on from `Scan.good`, see `records.scan`)."""
        ...

    def read_at(self, run: str, offsets: list[int]) -> list[bytes]:
        """The raw lines at `offsets` (ascending) of stream `run`, newline included, not verified
        (b"" where no line starts: the stream changed under the reader)."""
        ...

    def append(
        self, run: str, frames: list[bytes], policy: FsyncPolicy | None, token: int | None
    ) -> tuple[list[int], int, Durable | None]:
        """Append framed lines to `run` atomically: (their positions, the stream's identity,
        a callable that waits until they are durable or None). `policy` None uses the store's;
        `token` (a lease's fencing token) is checked in the same step."""
        ...

    def append_if(self, run: str, frames: list[bytes], expect_end: int) -> list[int] | None:
        """Append framed lines to `run` only if its end is still `expect_end` (the `head` or
        `Scan.size` the caller read; 0: the stream does not exist yet), checked atomically with
        the append and durable on return: their positions, or None, nothing written, when the
        stream's end moved (read it again and retry). A writer that decides from what it read
        appends this way (the inbox)."""
        ...

    def replace_if(self, run: str, frames: list[bytes], expect_end: int) -> bool:
        """`replace`, atomically with a check that the stream still ends at `expect_end`; False,
        nothing changed, when it moved (an append slipped in: read it again)."""
        ...

    def replace(self, run: str, frames: Iterable[bytes]) -> None:
        """Replace stream `run` whole with `frames` atomically (no frames: remove the run); when
        `frames` raises, the stream is left as it was."""
        ...

    def remove(self) -> None:
        """Delete the whole session (streams, documents, fence)."""
        ...

    def load_doc(self, name: str) -> tuple[dict[str, Any] | None, DocVersion]:
        """Document `name` (verified) and its version; (None, None) when there is none."""
        ...

    def save_doc(self, name: str, doc: dict[str, Any], expect: DocVersion) -> bool:
        """Write document `name` if its version is still `expect`; False when it changed."""
        ...

    def delete_doc(self, name: str) -> None:
        """Remove document `name` (nothing when there is none)."""
        ...

    def highest_fence(self) -> int | None:
        """The highest lease token the session's fence recorded (None: none yet)."""
        ...

    def advance_fence(self, token: int) -> None:
        """Record lease token `token` as the session's highest, or raise
        `StaleFencingTokenError` when a higher one was granted."""
        ...

    def load_index(self, run: str) -> Snapshot | None:
        """The persisted index of stream `run` (None: none, or it does not describe the stream)."""
        ...

    def save_index(
        self, run: str, cover: tuple[int, int, int, str], state: dict[str, Any], probes: list[tuple[int, str]]
    ) -> None:
        """Persist the index `state` of stream `run` covering (end, lines, last, crc) (`indexfile.save`)."""
        ...

    def crc_at(self, run: str, offset: int) -> str:
        """The checksum field of the line at `offset` of stream `run` (not verified)."""
        ...

    def sync(self, run: str | None = None) -> None:
        """Make every append so far durable (with `run`: at least those to stream `run`, whoever
        in this process made them)."""
        ...

    @property
    def held(self) -> bool:
        """Whether a `hold` defers the durability of the session's appends to its `commit`s."""
        ...

    def hold(self) -> None:
        """Start deferring the durability of every append to the session (its checkpoints, events,
        journal records) to the session's commits: a run holds its session while it is driven, so
        a step's appends reach the disk together, one fsync per file, instead of one per append.
        Holds nest; end each with `release`. Nothing on a store whose every commit is durable on
        its own (PostgreSQL)."""
        ...

    def release(self) -> None:
        """End one `hold`; the outermost one makes every append to the session durable."""
        ...

    def commit(self, run: str) -> None:
        """Make stream `run` durable now, and, while the session is held, the checkpoint data (the
        run streams) appended before it first: after a crash no reader finds the event log or the
        journal ahead of the checkpoints they follow. Other held streams stay deferred (the event
        log at a journal's commit, the journal at an event log's). Unheld: `sync(run)`."""
        ...

    def close(self) -> None:
        """Release what is held open between appends (reopened on the next one)."""
        ...

    def verify(self) -> list[FileReport]:
        """Every stream, document and persisted index of the session, verified, read-only: one
        `checkpointing.verify.FileReport` each, named as its file in a session folder
        (`runs/<run>/checkpoints.jsonl`, `events.jsonl`, `session.json`, `<log>.idx`), with the
        damaged line, where the intact part ends, and why. Files: `checkpointing.verify.
        verify_session` (a torn tail is `TORN`: reads skip it). PostgreSQL: `checkpointing.store.
        verify_ops.verify_rows` (no append is ever torn; damaged rows up to the stream's end are
        `BAD_TAIL`, which reads refuse). On both, a damaged line followed by intact ones is `CORRUPT`."""
        ...

    def repair(self, report: FileReport, fence_floor: int = 0) -> Repair | None:
        """Mend what `report` (of `verify`) found when it is repairable, keeping every line that
        verifies: a torn tail (files) or a bad tail (PostgreSQL) is cut and its bytes kept in
        `<file>.broken` (a file, or a document of that name); a damaged `session.json` or
        `pins.json` is moved aside to `<name>.broken`; a damaged persisted index is removed; a
        damaged `fence.json` (files) is rewritten above `fence_floor` and every token the event
        log carries. What was done, or None (nothing to do, or the stream changed since `verify`).
        The caller holds the session's lease, so no writer runs meanwhile."""
        ...


class Store(Protocol):
    """Every session of one backend."""

    url: str
    """What the store was opened from (a folder, a PostgreSQL URL)."""

    @property
    def blobs(self) -> Blobs:
        """The store's content-addressed blobs (`checkpointing.blobs.Blobs`): files under
        `base_dir/blobs`, or rows of the same database, so a session needs nothing else."""
        ...

    def session(self, tenant: str, thread: str, fsync: FsyncPolicy) -> SessionStreams:
        """The streams of session (tenant, thread); nothing is created before the first append."""
        ...

    def threads(self, tenant: str | None = None, thread: str | None = None) -> list[tuple[str, str]]:
        """(tenant, thread) of each session holding a stream, filtered by tenant and/or thread."""
        ...

    def holding(self, tenant: str, run: str) -> list[str]:
        """The tenant's sessions whose session stream `run` holds anything, by id, sorted."""
        ...

    def outbox_holders(self, tenant: str | None = None) -> list[tuple[str, str]]:
        """(tenant, session) of every session of `tenant` (None: every tenant) whose OUTBOX holds
        anything, sorted, read from an index of them (never every session's records)."""
        ...

    def doc_tenants(self, thread: str, name: str) -> list[str]:
        """The tenants whose session `thread` holds document `name`, sorted (a server finds the
        tenants with crons this way, without reading every session)."""
        ...

    def reserve(self, tenant: str, key: str, value: dict[str, Any]) -> dict[str, Any] | None:
        """Claim id `key` in the tenant's reservations (a turn id -> its session) with `value`,
        once, durable on return: None when this call claimed it, else what holds it ({} when that
        does not read back: a damaged or half-written reservation still holds its id)."""
        ...

    def reserved(self, tenant: str, key: str) -> dict[str, Any] | None:
        """The value reserving `key` (verified), None when there is none; a damaged one raises
        `CorruptRecordError` naming it."""
        ...

    def unreserve(self, tenant: str, key: str | None = None) -> int:
        """Delete the reservation of `key` (None: every one of the tenant); how many went."""
        ...

    def close(self) -> None:
        """Release connections (the store is not used after)."""
        ...
