"""A PostgreSQL session's documents and persisted stream indexes (rows of `jsonl_documents`), and
what they need of its streams: their names in messages and their rows read at given positions.

`PostgresSessionDocs` is the part of `pg_streams.PostgresSessionStreams` that does this. A document
row is one framed line with a version for compare-and-swap (`save_doc`); a stream's index row is
`indexfile`'s framed line, checked against the stream before use (`load_index`) and dropped when
the stream is rewritten, so a new process opening a long thread reads only the rows past it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkpointing import indexfile
from checkpointing.exceptions import CorruptCheckpointError, CorruptRecordError, StoreUnavailableError
from checkpointing.indexfile import Snapshot
from checkpointing.layout import EVENTS_FILE, INBOX_FILE, JOURNAL_FILE, OUTBOX_FILE
from checkpointing.records import decode_file, encode_record, record_crc
from checkpointing.store.base import EVENTS, INBOX, JOURNAL, OUTBOX, is_session_stream, served_file

if TYPE_CHECKING:
    from checkpointing.store.postgres import PostgresStore

log = logging.getLogger(__name__)
_SESSION_NAMES = {EVENTS: EVENTS_FILE, JOURNAL: JOURNAL_FILE, INBOX: INBOX_FILE, OUTBOX: OUTBOX_FILE}
"""How each session stream is named in messages (its file's name on the `files` store)."""


class PostgresSessionDocs:
    """A session's document rows, its streams' names and rows by position (see the module docstring)."""

    store: PostgresStore
    q: dict[str, bytes]
    tenant: str
    thread: str
    label: Path
    _ids: dict[str, int]

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

    def _id(self, run: str) -> int | None:
        sid = self._ids.get(run)
        if sid is None:
            with self.store.connection("reading the session's streams") as conn:
                row = conn.execute(self.q["stream_id"], (self.tenant, self.thread, run)).fetchone()
            if row is not None:
                sid = self._ids[run] = int(row[0])
        return sid

    def read_at(self, run: str, offsets: list[int]) -> list[bytes]:
        """The rows at `offsets` (b"" where none is)."""
        sid = self._id(run)
        if sid is None:
            return [b""] * len(offsets)
        with self.store.connection("reading records") as conn:
            rows = conn.execute(self.q["read"], (sid, list(offsets))).fetchall()
        found = {int(pos): bytes(raw) for pos, raw in rows}
        return [found.get(off, b"") for off in offsets]

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


def _index_doc(run: str) -> str:
    """The document holding the persisted index of stream `run` (its index file's path on the
    `files` store, relative to the session folder: never a document of an id's name)."""
    if not is_session_stream(run):
        return f"runs/{run}/checkpoints.jsonl.idx"
    return f"{served_file(run) or _SESSION_NAMES[run]}.idx"
