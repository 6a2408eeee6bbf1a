"""The in-memory index of an event log (`checkpointing.entry_log`), kept in step with its stream.

Each entry's envelope (id, parent, branch, type) and where its line is, the tree of parents and
each branch's ends (`EntryTree`), and the columns it is persisted as (`indexfile`'s state, kept
beside the log by its store: `SessionStreams.save_index`). `StreamIndex` builds it from the
persisted index and the lines past it (or a scan of the whole stream), catches up with lines
other processes appended, and starts again when the stream was replaced, removed or cut.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from checkpointing import indexfile
from checkpointing._events_types import SCHEMA_VERSION
from checkpointing.exceptions import CorruptRecordError, StoreUnavailableError, UnknownSchemaError
from checkpointing.records import check_line, loads
from checkpointing.store.base import EVENTS, SessionStreams

SEEKS_MAX = 64
"""A read needing more bodies than this (not in memory) scans the log once instead of seeking."""
_SAVE_EVERY = 64 * 1024
"""The index is persisted when the log grew this much (or by half) since it last was."""
_log = logging.getLogger(__name__)
PREVIOUS = 1
"""In the persisted index: this entry's parent is the entry before it (the common case)."""

# The envelope of an entry as the log writes it (orjson, keys in this order, ids without escapes):
# read without parsing the payload, so indexing a long log costs a checksum and a regex per line.
_ENVELOPE = re.compile(
    rb'\{"id":"([^"\\]+)","parent_id":(?:null|"([^"\\]+)"),"branch_id":"([^"\\]+)","type":"([^"\\]+)"'
)


class Rec:
    """One indexed entry: its envelope, where it is, and its verified JSON body once read (the
    payload is parsed on demand; an entry indexed from the persisted index has no body yet)."""

    __slots__ = ("body", "branch_id", "id", "line", "off", "parent_id", "type")

    def __init__(
        self, eid: str, parent_id: str | None, branch_id: str, type: str, body: bytes | None, off: int, line: int
    ) -> None:
        self.id = eid
        self.parent_id = parent_id
        self.branch_id = branch_id
        self.type = type
        self.body = body
        self.off = off
        self.line = line


def envelope_of(body: bytes, off: int, line: int) -> Rec | None:
    """The entry a verified body holds, read from its envelope alone (None: not in the log's own
    key order, the caller parses it)."""
    m = _ENVELOPE.match(body)
    if m is None:
        return None
    eid, parent, branch, etype = (g.decode() if g is not None else None for g in m.groups())
    assert eid is not None and branch is not None and etype is not None
    return Rec(eid, parent, branch, etype, body, off, line)


def envelope_id(body: bytes) -> str | None:
    """The id in a verified body's envelope (None: not in the log's own key order)."""
    m = _ENVELOPE.match(body)
    return m.group(1).decode() if m is not None else None


class EntryTree:
    """Every indexed entry by id, in append order, with children and branch ends."""

    def __init__(self) -> None:
        self.records: dict[str, Rec] = {}
        self.order: list[str] = []
        self.children: dict[str | None, list[str]] = {}
        self.branch_leaf: dict[str, str] = {}
        self.branch_first: dict[str, str] = {}
        self.branch_count: dict[str, int] = {}

    def add(self, rec: Rec) -> None:
        """Index `rec` as the newest entry."""
        self.records[rec.id] = rec
        self.order.append(rec.id)
        self.children.setdefault(rec.parent_id, []).append(rec.id)
        branch = rec.branch_id
        if branch not in self.branch_leaf:
            self.branch_first[branch] = rec.id
        self.branch_leaf[branch] = rec.id
        self.branch_count[branch] = self.branch_count.get(branch, 0) + 1

    def clear(self) -> None:
        """Forget every entry."""
        for d in (self.records, self.children, self.branch_leaf, self.branch_first, self.branch_count):
            d.clear()
        self.order.clear()

    def state(self, last: tuple[int, str]) -> dict[str, Any]:
        """The persisted form: columns of plain values (few objects to parse), a parent that is
        the entry before written as `PREVIOUS`; `last` is the last line's (offset, checksum)."""
        recs = [self.records[i] for i in self.order]
        prevs = [None, *self.order[:-1]]
        return {
            "ids": self.order,
            "parents": [PREVIOUS if r.parent_id == p and p else r.parent_id for r, p in zip(recs, prevs, strict=True)],
            "branches": [r.branch_id for r in recs],
            "types": [r.type for r in recs],
            "offs": [r.off for r in recs],
            "last": list(last),
        }


def from_state(st: Any) -> tuple[list[Rec], tuple[int, str]]:
    """The entries (without bodies; line 1 is the header) and the last line's (offset, checksum)
    of a persisted `state`; `KeyError`, `TypeError` or `ValueError` when it has another shape."""
    ids, offs = st["ids"], st["offs"]
    if len(ids) != len(offs):
        raise ValueError("columns of different lengths")
    recs: list[Rec] = []
    prev: str | None = None
    for i, (eid, parent, branch, etype, off) in enumerate(
        zip(ids, st["parents"], st["branches"], st["types"], offs, strict=True)
    ):
        pid = prev if parent == PREVIOUS else None if parent is None else str(parent)
        recs.append(Rec(str(eid), pid, str(branch), str(etype), None, int(off), i + 2))
        prev = str(eid)
    return recs, (int(st["last"][0]), str(st["last"][1]))


class StreamIndex:
    """The index of the EVENTS stream of `streams` (named `path` in errors); its caller holds
    the log's lock around every call."""

    def __init__(self, streams: SessionStreams, path: Path) -> None:
        self.streams = streams
        self.path = path
        self.tree = EntryTree()
        self.header: dict[str, Any] | None = None
        self.loaded = False
        self.ino = -1  # the stream's identity when indexed
        self.size = 0
        self.line = 0
        self.saved = 0  # end of the log its persisted index covers
        self.last: tuple[int, str] = (0, "")  # offset and checksum of the last indexed record
        self.appended = False  # only a process that appended persists the index

    def reset(self) -> None:
        """Forget everything (the next `load` indexes the stream again)."""
        self.loaded = False
        self.saved = 0
        self.last = (0, "")
        self.ino = -1
        self.size = 0
        self.line = 0
        self.header = None
        self.tree.clear()

    def index_body(self, body: bytes, line: int, off: int) -> None:
        """Index the verified line `body` (line `line`, at `off`)."""
        rec = envelope_of(body, off, line) if line > 1 else None
        if rec is None:
            self.index(_loads(body), line, body, off)
            return
        self.tree.add(rec)

    def index(self, rec: dict[str, Any], line: int, body: bytes | None, off: int) -> None:
        """Index record `rec` (the header on line 1, an entry after)."""
        if rec.get("kind") == "header":
            if line != 1:
                raise CorruptRecordError(str(self.path), line, "a second header inside the log")
            self._set_header(rec)
            return
        if line == 1:
            raise CorruptRecordError(str(self.path), 1, "the first record is not the session header")
        eid = rec.get("id")
        if not isinstance(eid, str) or not isinstance(rec.get("branch_id"), str) or "type" not in rec:
            raise CorruptRecordError(str(self.path), line, "entry lacks id, branch_id or type")
        self.tree.add(Rec(eid, rec.get("parent_id"), rec["branch_id"], str(rec["type"]), body, off, line))

    def _set_header(self, rec: dict[str, Any]) -> None:
        if rec.get("schema_version") != SCHEMA_VERSION:
            raise UnknownSchemaError(
                f"{self.path}: event log schema_version {rec.get('schema_version')!r} is not "
                f"{SCHEMA_VERSION} (written by a newer version of this library?); the file was left "
                "untouched: read it with the version that wrote it."
            )
        self.header = rec

    def read_at(self, off: int, line: int) -> dict[str, Any]:
        """The verified record whose line starts at `off` (line `line` of the log)."""
        raw = self.streams.read_at(EVENTS, [off])[0]
        try:
            rec = loads(check_line(self.path, raw, line, off))
        except ValueError as err:  # orjson's decode error; CorruptRecordError is not one
            raise CorruptRecordError(str(self.path), line, f"record is not JSON ({err})") from err
        if not isinstance(rec, dict):
            raise CorruptRecordError(str(self.path), line, "record is not a JSON object")
        return rec

    def _restore(self) -> bool:
        """Index the log from its persisted index (then only the entries past it are scanned)."""
        snap = self.streams.load_index(EVENTS)
        if snap is None:
            return False
        try:
            recs, last = from_state(snap.state)
        except (KeyError, TypeError, ValueError) as err:
            _log.warning("index of %s has an unknown shape (%s): scanning the log", self.path, err)
            return False
        # The header is read from the log itself (verified): it is the session's identity. A header
        # that does not read back whole is not trusted from the saved index: the log is scanned
        # instead, which reports a damaged log as it always does (and reads one that was removed
        # and written again meanwhile as it now is).
        try:
            header = self.read_at(0, 1)
        except CorruptRecordError as err:
            _log.warning("index of %s does not match the log (%s): scanning the log", self.path, err)
            return False
        if header.get("kind") != "header":
            raise CorruptRecordError(str(self.path), 1, "the first record is not the session header")
        self._set_header(header)
        for rec in recs:
            self.tree.add(rec)
        self.size, self.line, self.saved = snap.end, snap.lines, snap.end
        self.last = last
        return True

    def save(self) -> None:
        """Persist the index (when this process appended since it last did)."""
        if not self.loaded or self.saved == self.size or self.header is None or not self.appended:
            return
        cover = (self.size, self.line, self.last[0], self.last[1])
        self.streams.save_index(EVENTS, cover, self.tree.state(self.last), [])
        self.saved = self.size

    def load(self) -> None:
        """Bring the index up to the stream's end (indexed again when the stream was replaced)."""
        if self.loaded:
            end, ident = self.streams.head(EVENTS)
            if ident and ident == self.ino and end >= self.size:
                self.catch_up(end)
                return
            lost = self.appended and ident == self.ino and end < self.size
            # The stream was removed, replaced or cut by someone else: the index is void.
            self.reset()
            if lost:  # the same stream, shorter than what this process wrote and read back
                raise StoreUnavailableError(
                    f"{self.path}: entries this process wrote are gone (the log ends at byte {end}, it had "
                    f"{self.size}): the database lost commits it had not flushed yet (it crashed or failed "
                    "over); nothing was half-written"
                )
        # A read never modifies the stream: a torn tail is left for the appender (or a repair) to cut.
        if self._restore():
            self.ino = self.streams.head(EVENTS)[1]
            self.loaded = True
            self.catch_up()
            return
        found = self.streams.scan(EVENTS)
        self._index_found(found.records)
        ident = self.streams.head(EVENTS)[1]
        if ident:
            self.size, self.ino = found.good, ident
        self.loaded = True

    def catch_up(self, size: int | None = None) -> None:
        """Index the lines appended past the known end (`size`: the stream's end, when known)."""
        if size is None:
            size = self.streams.head(EVENTS)[0]
        if size <= self.size:
            return
        # An incomplete last line is another writer's record still in flight: taken next time.
        found = self.streams.scan(EVENTS, self.size, self.line + 1)
        self._index_found(found.records)
        self.size = found.good

    def _index_found(self, records: list[tuple[int, bytes]]) -> None:
        for off, body in records:
            self.line += 1
            self.index_body(body, self.line, off)
        if records:
            self.last = (records[-1][0], indexfile.record_crc(records[-1][1]))

    def note_append(self, rec: dict[str, Any], offset: int, framed: bytes) -> None:
        """Index entry `rec`, just appended as line `framed` at `offset` (the lines others
        appended before it first, in stream order); persist the index when it grew enough."""
        if offset > self.size:
            self.catch_up()
        else:
            self.line += 1
            # No body kept: an appender rarely reads its own entries back, and a run appends
            # thousands (orjson's output also keeps a 4 KB buffer each); read it back if asked.
            self.index(rec, self.line, None, offset)
            self.size = offset + len(framed)
            self.last = (offset, indexfile.record_crc(framed))
        self.appended = True
        if self.size - self.saved > max(_SAVE_EVERY, self.saved // 2):
            self.save()

    def full(self, rec: Rec) -> dict[str, Any]:
        """The entry as stored (blob references unresolved), its line read and verified if needed."""
        if rec.body is None:
            try:
                full = self.read_at(rec.off, rec.line)
            except FileNotFoundError as err:
                raise CorruptRecordError(str(self.path), rec.line, "the log was removed under us") from err
            if full.get("id") != rec.id:
                raise CorruptRecordError(str(self.path), rec.line, f"entry {rec.id} is not where the index says")
            return full
        return _loads(rec.body)

    def with_bodies(self, recs: list[Rec]) -> list[Rec]:
        """`recs`, their bodies read in one verified scan of the log when many are missing (a
        whole-history read), instead of one seek each."""
        if sum(1 for r in recs if r.body is None) > SEEKS_MAX:
            at = {off: body for off, body in self.streams.scan(EVENTS, 0, 1).records}
            for r in recs:
                if r.body is None:
                    body = at.get(r.off)
                    if body is None or _entry_id(body) != r.id:
                        raise CorruptRecordError(str(self.path), r.line, f"entry {r.id} is not where the index says")
                    r.body = body
        return recs


def _entry_id(body: bytes) -> Any:
    """The id of the entry a verified body holds (from its envelope, else parsed)."""
    eid = envelope_id(body)
    return eid if eid is not None else _loads(body).get("id")


def _loads(body: bytes) -> dict[str, Any]:
    rec: dict[str, Any] = loads(body)
    return rec
