"""The records of one session (thread) and the in-memory index that finds records in them.

    sessions/<thread>/runs/<run>/checkpoints.jsonl   checkpoint, pending-writes and item records
    sessions/<thread>/pins.json                      checkpoint ids that retention must keep

(in files, or as the same lines in PostgreSQL rows: `checkpointing.store`; record bytes verified by
`checkpointing.records`). Below, "run file" is a run's record stream in either store; the index
files and inodes are the files store's (PostgreSQL: an index row per stream, the stream's row id).

The index is built by one verified scan of each run file when the session is first opened in a
process, and caught up from the bytes past its end when another process grew a file. A process
that appends persists each run file's part of it beside the file (`checkpoints.jsonl.idx`, see
`checkpointing.indexfile`: a checked cache, never the data), so the next process reads that and
scans only the records past it: opening a long session costs its tail, not its history. A
checkpoint's channel homes and versions are then read from its record when first needed. A run
file found replaced (another inode: another saver deleted and restarted the thread) is indexed
again from scratch. Each run file's append descriptor stays open between
appends and is closed when the session is rewritten, removed or evicted, or when its file was
replaced, so no append goes to a file that is no longer there. Reads never modify files: a torn
tail is skipped, a damaged complete record raises `CorruptCheckpointError` naming file and line.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from checkpointing import indexfile
from checkpointing.exceptions import CorruptCheckpointError, CorruptRecordError, UnknownSchemaError
from checkpointing.records import Durable, FsyncPolicy, check_line, frame
from checkpointing.store.base import SessionStreams

_DETAILED = 64
"""Checkpoints whose channel homes and versions stay in memory (the newest put or read)."""
_SAVE_EVERY = 256 * 1024
"""A run's index is persisted when the file grew this much (or by half) since it last was."""
log = logging.getLogger(__name__)
SCHEMA_VERSION = 4
"""The schema version records are written with, but for a checkpoint record that holds
`histories` (retention kept its DeltaChannel history in it): `HISTORIES_SCHEMA_VERSION`, so that a
saver from before cannot misread it as a checkpoint whose history starts at its missing parent.
4: a checkpoint record lists the distinct homes of its channels once (`homes`) and `task_state`
maps a channel to an index into that list, and `parent_writes` holds one `[task_id, idx, ...]` per
task (each checkpoint repeated an 18-channel map of 36-character ids, and a task id per write: a
quarter of its bytes). 3: `task_state` maps a channel to its home id; 2: `[version, home]` pairs.
All three are read, and every form reads back as pairs (and `[task_id, idx]` pairs)."""
HISTORIES_SCHEMA_VERSION = 5
"""5: a checkpoint record may hold `histories` (see `_saver_docs.HISTORIES`); otherwise as 4."""
READABLE_SCHEMA_VERSIONS = frozenset({2, 3, SCHEMA_VERSION, HISTORIES_SCHEMA_VERSION})
ITEM_SCHEMA_VERSION = 3
"""The schema version item records are written with (their form has not changed since 3)."""
PINS_DOC = "pins.json"
"""The document holding the pinned checkpoints (`layout.PINS_FILE` in a session folder)."""
_CACHE_BYTES = 1024 * 1024
"""Parsed records kept per session, by their size on disk (parsed, they take several times more).
A run's own reads are of its newest records (a put's parent, the DeltaChannel history back to the
last snapshot, re-read per step only for the tail); a larger cache made a long turn's memory grow."""


@dataclass
class CpLoc:
    """Where a checkpoint record is, plus what reads and retention need without reading it.

    `homes`, `versions` and `missing` are None until read from the record (`SessionStore.detail`)
    when the location came from a persisted index."""

    run: str
    off: int
    line: int
    parent: str | None
    meta_run: str | None
    homes: dict[str, str] | None = None
    versions: dict[str, Any] | None = None
    missing: list[str] | None = None


@dataclass
class WriteLoc:
    """Where one pending-writes record is and which (task_id, idx) keys it holds."""

    run: str
    off: int
    line: int
    task: str
    idxs: list[int]


@dataclass
class SessionIndex:
    """The in-memory index of a session."""

    cps: dict[tuple[str, str], CpLoc] = field(default_factory=dict)
    latest: dict[str, str] = field(default_factory=dict)
    writes: dict[tuple[str, str], list[WriteLoc]] = field(default_factory=dict)
    children: dict[tuple[str, str], int] = field(default_factory=dict)
    # (ns, channel, version as JSON) -> the checkpoint whose record stores that value; built on
    # first use (a put whose parent does not hold a channel's version: rare), kept up to date after
    by_version: dict[tuple[str, str, str], str] | None = None
    # the checkpoints whose homes/versions are in memory, oldest first (see `_DETAILED`)
    detailed: deque[tuple[str, str]] = field(default_factory=deque)
    # content hash -> (run, offset, line) of the item record holding that JSON
    items: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    # run -> item records in that run whose hash `items` locates in another run (a rewrite copies)
    dup_items: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    # run -> (end of the last intact record, records up to there), and where that last record starts
    ends: dict[str, tuple[int, int]] = field(default_factory=dict)
    # run -> the last checkpoint or writes record indexed: (offset, checksum, end, lines up to its
    # end). A persisted index covers the file up to there (an item record is content-addressed, so
    # it could be written again at the same place after a crash: it never vouches for the file)
    lasts: dict[str, tuple[int, str, int, int]] = field(default_factory=dict)
    # run -> how many checkpoints its file holds (retention asks at every put)
    counts: dict[str, int] = field(default_factory=dict)
    # run -> inode of the file indexed: another inode means it was replaced (index from scratch)
    inodes: dict[str, int] = field(default_factory=dict)


def version_key(version: Any) -> str:
    """A version as index key: its JSON, so 5, 5.0 and "5" stay distinct.

    Decoded to a str on purpose: the bytes `orjson.dumps` returns keep the 4 KB buffer they were
    written in, and the index holds one key per stored channel value (about 15 per tool step)."""
    return orjson.dumps(version).decode()


class SessionStore:
    """Read and append the records of one session; keeps its index in memory."""

    def __init__(self, streams: SessionStreams) -> None:
        self.streams = streams
        self.tenant = streams.tenant
        self.key = streams.key
        self.runs_dir = streams.label
        self._heads: dict[str, tuple[int, int]] | None = None
        self._idx: SessionIndex | None = None
        self._checked = False
        self._cache: OrderedDict[tuple[str, int], tuple[dict[str, Any], int]] = OrderedDict()
        self._cache_bytes = 0
        self._saved: dict[str, int] = {}  # run -> end of the file its persisted index covers
        self._saved_due: set[str] = set()  # runs appended to since their index was persisted
        # item hash -> decoded value (messages) for reads; see DocumentBuilder.decode_item.
        self.decoded: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.decoded_bytes = 0
        # id(message) -> (message, its stored form): each message object is encoded and hashed once.
        self.memo: dict[int, tuple[Any, Any, tuple[int, ...]]] = {}

    # -- index ---------------------------------------------------------------------------------

    @property
    def index(self) -> SessionIndex:
        """The index, loaded (or caught up when another process appended) on demand."""
        if self._idx is None:
            self._idx = SessionIndex()
            self._checked = False
        if not self._checked:
            self._catch_up(self._idx)
            self._checked = True
        return self._idx

    def begin(self) -> None:
        """Start of a saver call: look once whether another process grew a run file."""
        self._checked = False

    def exists(self) -> bool:
        """Whether this session has any checkpoint."""
        return bool(self.index.cps)

    def run_file(self, run: str) -> Path:
        """The name of a run's stream (for files, the path of its log)."""
        return self.streams.path(run)

    def runs(self) -> list[str]:
        """Run ids with a stream."""
        return sorted(r for r, (_, ident) in self.streams.heads().items() if ident)

    def _catch_up(self, idx: SessionIndex) -> None:
        heads = self.streams.heads()
        if not heads and idx.ends:
            self._reset()  # the session was removed under us
            return None
        for run, (size, ino) in heads.items():
            path = self.run_file(run)
            end, lines = idx.ends.get(run, (0, 0))
            if size < end or idx.inodes.get(run, ino) != ino:
                # Shorter than indexed (rewritten, or a torn tail cut by a repair), or another file in its
                # place (deleted and started again by another saver): start over.
                return self._catch_up(self._reset())
            idx.inodes[run] = ino
            if run not in idx.ends and size and (snap := self.streams.load_index(run)) is not None:
                end, lines = self._restore(idx, run, snap) or (end, lines)
            if size == end:
                continue
            try:
                found = self.streams.scan(run, end, lines + 1)
            except CorruptRecordError as err:
                raise CorruptCheckpointError(err.path, err.line, err.reason) from err
            last = -1
            for i, (off, body) in enumerate(found.records):
                h = _item_hash(body)
                if h is not None:  # an item's value is parsed when it is read, not to index it
                    _add_item(idx, h, run, off, lines + 1 + i)
                    continue
                rec = _parse(body, path, lines + 1 + i)
                _apply(idx, run, off, lines + 1 + i, rec)
                last = i
            if last >= 0:
                off, body = found.records[last]
                after = found.records[last + 1][0] if last + 1 < len(found.records) else found.good
                idx.lasts[run] = (off, indexfile.record_crc(body), after, lines + last + 1)
            idx.ends[run] = (found.good, lines + len(found.records))
        return None

    # -- the persisted index -------------------------------------------------------------------

    def _restore(self, idx: SessionIndex, run: str, snap: indexfile.Snapshot) -> tuple[int, int] | None:
        """Index run file `run` from its persisted index; the (end, lines) it covers, or None (and
        nothing indexed) when the index is not of the shape `save_index` writes."""
        try:
            state = snap.state
            cps = [
                (str(ns), str(cp), int(off), int(line), parent, meta)
                for ns, cp, off, line, parent, meta in state["cps"]
            ]
            writes = [
                (str(ns), str(cp), WriteLoc(run, int(off), int(line), str(task), [int(i) for i in idxs]))
                for ns, cp, off, line, task, idxs in state["writes"]
            ]
            items = [(str(h), int(off), int(line)) for h, off, line in state["items"]]
            last = (int(state["last"][0]), str(state["last"][1]), snap.end, snap.lines)
        except (KeyError, TypeError, ValueError) as err:
            log.warning("index of %s has an unknown shape (%s): scanning the file", self.run_file(run), err)
            return None
        for ns, cp_id, off, line, parent, meta_run in cps:
            idx.cps[(ns, cp_id)] = CpLoc(run, off, line, parent, meta_run)
            idx.counts[run] = idx.counts.get(run, 0) + 1
            if parent:
                idx.children[(ns, parent)] = idx.children.get((ns, parent), 0) + 1
            if cp_id > idx.latest.get(ns, ""):
                idx.latest[ns] = cp_id
        for ns, cp_id, w in writes:
            idx.writes.setdefault((ns, cp_id), []).append(w)
        for h, off, line in items:
            _add_item(idx, h, run, off, line)
        idx.lasts[run] = last
        idx.ends[run] = (snap.end, snap.lines)
        self._saved[run] = snap.end
        return snap.end, snap.lines

    def save_index(self, run: str | None = None) -> None:
        """Persist the index of run file `run` (every run this store appended to when None)."""
        idx = self._idx
        if idx is None or not self.streams.persists_index:
            return
        # A store that appended also indexes the session's other run files (written before, or by
        # an older version): the next open of a long session is then cheap whichever run grew it.
        due = [run] if run is not None else sorted(self._saved_due | set(idx.ends) if self._saved_due else ())
        for r in due:
            self._saved_due.discard(r)
            if r not in idx.lasts:
                continue
            last, crc, end, lines = idx.lasts[r]  # covered: up to the last checkpoint / writes record
            if self._saved.get(r) == end or not self._same_file(r):
                continue
            cps = [
                [ns, cp, c.off, c.line, c.parent, c.meta_run]
                for (ns, cp), c in idx.cps.items()
                if c.run == r and c.off < end
            ]
            writes = [
                [ns, cp, w.off, w.line, w.task, w.idxs]
                for (ns, cp), ws in idx.writes.items()
                for w in ws
                if w.run == r and w.off < end
            ]
            items = [[h, loc[1], loc[2]] for h, loc in idx.items.items() if loc[0] == r and loc[1] < end]
            items += [list(d) for d in idx.dup_items.get(r, ()) if d[1] < end]
            state = {"cps": cps, "writes": writes, "items": items, "last": [last, crc]}
            # The first, middle and a late checkpoint record vouch for the file with the last one.
            offs = sorted(c.off for c in idx.cps.values() if c.run == r and c.off < last)
            picks = sorted({offs[0], offs[len(offs) // 2], offs[-1]}) if offs else []
            probes = [(off, self.streams.crc_at(r, off)) for off in picks]
            self.streams.save_index(r, (end, lines, last, crc), state, probes)
            self._saved[r] = end

    def _same_file(self, run: str) -> bool:
        """Whether run file `run` is still the file this index was built from (not replaced since)."""
        known = self._idx.inodes.get(run) if self._idx is not None else None
        return known is None or self.streams.heads().get(run, (0, 0))[1] == known

    def index_from(self, run: str, recs: list[tuple[int, dict[str, Any]]], good: int) -> None:
        """Index run file `run` from records its caller has just read and checksum-verified
        ((offset, record) in file order, `good` the end of the last intact one), instead of reading
        the file a second time; bytes past `good` are caught up as usual."""
        idx = self._idx if self._idx is not None else self._reset()
        if run in idx.ends:
            return
        path = self.run_file(run)
        # `_checked` converts a checkpoint's task_state in place: on a copy, the caller keeps its records.
        checked = [
            _checked(rec if rec.get("k") == "i" else dict(rec), path, line) for line, (_, rec) in enumerate(recs, 1)
        ]
        try:
            for line, ((off, _), rec) in enumerate(zip(recs, checked, strict=True), 1):
                _apply(idx, run, off, line, rec)
        except Exception:
            self._reset()  # nothing half-indexed: the next read scans the files itself
            raise
        last = max((i for i, (_, rec) in enumerate(recs) if rec.get("k") != "i"), default=-1)
        if last >= 0:
            off = recs[last][0]
            after = recs[last + 1][0] if last + 1 < len(recs) else good
            idx.lasts[run] = (off, self.streams.crc_at(run, off), after, last + 1)
        idx.ends[run] = (good, len(recs))
        self._checked = False

    def _reset(self) -> SessionIndex:
        self.close_files()
        self._saved.clear()
        self._idx = idx = SessionIndex()
        self._cache.clear()
        self._cache_bytes = 0
        self.decoded.clear()
        self.decoded_bytes = 0
        return idx

    # -- appends -------------------------------------------------------------------------------

    def append(
        self,
        run: str,
        record: dict[str, Any] | None,
        durable: bool | None = None,
        items: dict[str, bytes] | None = None,
        token: int | None = None,
    ) -> Durable | None:
        """Append the item records `items` (hash -> JSON) then `record` (if any), in one write, and
        index them; refused (`StaleFencingTokenError`) when lease token `token` is stale.

        Returns the callable that waits until the write is durable (per the fsync policy, or
        `durable` when given), or None: call it after releasing your locks."""
        idx = self.index
        hashes = list(items or {})
        frames = [item_frame(h, (items or {})[h]) for h in hashes]
        if record is not None:
            frames.append(frame(orjson.dumps(disk_form(record))))
        if not frames:
            return None
        policy: FsyncPolicy | None = None if durable is None else "always" if durable else "never"
        try:
            offs, ino, wait = self.streams.append(run, frames, policy, token)
        except CorruptRecordError as err:
            raise CorruptCheckpointError(err.path, err.line, err.reason) from err
        end, lines = idx.ends.get(run, (0, 0))
        if offs[0] != end:
            # Another writer appended (or a torn tail was cut) since we indexed: re-scan instead.
            self.begin()
            self.index  # noqa: B018 - catch up
            return wait
        if ino:
            idx.inodes[run] = ino
        for i, h in enumerate(hashes):
            _add_item(idx, h, run, offs[i], lines + 1 + i)
        lines += len(hashes)
        if record is not None:
            _apply(idx, run, offs[-1], lines + 1, record, fill=True)
            lines += 1
            self._cache_put((run, offs[-1]), record, len(frames[-1]))
        end = offs[-1] + len(frames[-1])
        idx.ends[run] = (end, lines)
        if record is not None:
            idx.lasts[run] = (offs[-1], indexfile.record_crc(frames[-1]), end, lines)
        self._saved_due.add(run)
        saved = self._saved.get(run, 0)
        if end - saved > max(_SAVE_EVERY, saved // 2):  # geometric: the saves of a run cost O(its size)
            self.save_index(run)
        return wait

    def detail(self, key: tuple[str, str]) -> CpLoc:
        """The index entry of checkpoint `key` with its homes, versions and missing channels."""
        loc = self.index.cps[key]
        if loc.homes is None:
            _fill(self.index, loc, self.read(loc.run, loc.off, loc.line))
        return loc

    def home_of(self, ns: str, ch: str, version: str) -> str | None:
        """The checkpoint whose record stores channel `ch` at `version` (a `version_key`), if any."""
        idx = self.index
        if idx.by_version is None:  # first use: every checkpoint record is read once
            built: dict[tuple[str, str, str], str] = {}
            for (cp_ns, cp_id), loc in list(idx.cps.items()):
                rec = self.read(loc.run, loc.off, loc.line)
                _versions_into(built, cp_ns, cp_id, rec)
            idx.by_version = built
        return idx.by_version.get((ns, ch, version))

    def item(self, h: str) -> Any:
        """The JSON value stored under content hash `h` (its record checksum-verified)."""
        loc = self.index.items.get(h)
        if loc is None:
            raise CorruptCheckpointError(str(self.runs_dir), 0, f"stored item {h} is missing")
        return self._keyed(self.read(*loc), loc, "h", h)["v"]

    def items(self, hashes: list[str]) -> list[Any]:
        """The values of several items, in the order asked; each run file is opened once and read
        in offset order (cached records are not read again)."""
        idx = self.index
        out: list[Any] = [None] * len(hashes)
        todo: dict[str, list[tuple[int, int, int]]] = {}
        for i, h in enumerate(hashes):
            loc = idx.items.get(h)
            if loc is None:
                raise CorruptCheckpointError(str(self.runs_dir), 0, f"stored item {h} is missing")
            hit = self._cache.get((loc[0], loc[1]))
            if hit is not None:
                out[i] = self._keyed(hit[0], loc, "h", h)["v"]
            else:
                todo.setdefault(loc[0], []).append((loc[1], loc[2], i))
        for run, wanted in todo.items():
            wanted.sort()
            lines = self.streams.read_at(run, [off for off, _, _ in wanted])
            for (off, line, i), raw in zip(wanted, lines, strict=True):
                rec = self._verified(raw, run, off, line, cache=False)
                out[i] = self._keyed(rec, (run, off, line), "h", hashes[i])["v"]
        return out

    def sync(self) -> None:
        """Make every append durable (fsync the run files) and persist their indexes."""
        self.streams.sync()
        self.save_index()

    def close_files(self) -> None:
        """Close the run files' append descriptors (they reopen on the next append)."""
        self.streams.close()

    # -- reads ---------------------------------------------------------------------------------

    def read(self, run: str, off: int, line: int) -> dict[str, Any]:
        """The record at `off` of a run file (cached), verified by checksum."""
        key = (run, off)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit[0]
        return self._verified(self.streams.read_at(run, [off])[0], run, off, line)

    def _verified(self, raw: bytes, run: str, off: int, line: int, cache: bool = True) -> dict[str, Any]:
        """Verify (`records.check_line`) and parse the line read at `off` of a run file, and cache
        it (unless not `cache`: items read in bulk are decoded once by their caller, which keeps
        what it needs)."""
        path = self.run_file(run)
        try:
            rec = _parse(check_line(path, raw, line, off), path, line)
        except CorruptRecordError as err:
            raise CorruptCheckpointError(err.path, err.line, err.reason) from err
        except ValueError as err:
            raise CorruptCheckpointError(str(path), line, str(err)) from err
        if cache:
            self._cache_put((run, off), rec, len(raw))
        return rec

    def _cache_put(self, key: tuple[str, int], rec: dict[str, Any], size: int) -> None:
        self._cache[key] = (rec, size)
        self._cache_bytes += size
        while self._cache_bytes > _CACHE_BYTES and len(self._cache) > 1:
            _, (_, old) = self._cache.popitem(last=False)
            self._cache_bytes -= old

    def doc(self, ns: str, cp_id: str) -> dict[str, Any] | None:
        """The checkpoint record (ns, cp_id), or None when it is not in this session."""
        loc = self.index.cps.get((ns, cp_id))
        if loc is None:
            return None
        return self._keyed(self.read(loc.run, loc.off, loc.line), (loc.run, loc.off, loc.line), "checkpoint_id", cp_id)

    def writes_records(self, ns: str, cp_id: str) -> list[dict[str, Any]]:
        """The pending-writes records of checkpoint (ns, cp_id), in append order."""
        return [
            self._keyed(self.read(w.run, w.off, w.line), (w.run, w.off, w.line), "checkpoint_id", cp_id)
            for w in self.index.writes.get((ns, cp_id), [])
        ]

    def _keyed(self, rec: dict[str, Any], loc: tuple[str, int, int], key: str, want: str) -> dict[str, Any]:
        """`rec`, after checking it is the record the index says is there (an index is a cache)."""
        if rec.get(key) != want:
            raise CorruptCheckpointError(
                str(self.run_file(loc[0])),
                loc[2],
                f"the index locates {key} {want} at byte {loc[1]}, another record is there",
            )
        return rec

    def all_records(self, run: str, *, items: bool = True) -> list[dict[str, Any]]:
        """Every record of a run file, in order (verified); without item records when not `items`
        (a rewrite re-reads the items it keeps: decoding them all would hold the whole file's
        values in memory at once)."""
        path = self.run_file(run)
        try:
            found = self.streams.scan(run)
        except CorruptRecordError as err:
            raise CorruptCheckpointError(err.path, err.line, err.reason) from err
        return [
            _parse(body, path, i + 1)
            for i, (_, body) in enumerate(found.records)
            if items or not body.startswith(_ITEM_HEAD)
        ]

    def forget(self) -> None:
        """Drop open logs, caches and the index (after files were rewritten or removed)."""
        self.close_files()
        self._cache.clear()
        self._cache_bytes = 0
        self.decoded.clear()
        self.decoded_bytes = 0
        self._idx = None
        self._saved.clear()
        self._saved_due.clear()

    def replace_run(self, run: str, records: list[dict[str, Any]], head: list[bytes] | None = None) -> None:
        """Atomically replace a run file with the framed lines `head` (verified item records copied
        as they are, see `item_frames`) then `records` (or remove the run when both are empty)."""
        self.streams.replace(run, [*(head or []), *(frame(orjson.dumps(disk_form(r))) for r in records)])

    def items_in(self, run: str) -> list[str]:
        """The hashes of the item records run file `run` holds, in file order."""
        idx = self.index
        found = [(loc[1], h) for h, loc in idx.items.items() if loc[0] == run]
        found += [(off, h) for h, off, _ in idx.dup_items.get(run, ())]
        return list(dict.fromkeys(h for _, h in sorted(found)))

    def item_frames(self, hashes: list[str]) -> list[bytes]:
        """The framed lines of the item records `hashes`, each verified, in the order asked (a
        rewrite copies them byte for byte instead of decoding and encoding every value again)."""
        idx = self.index
        out: list[bytes] = [b""] * len(hashes)
        todo: dict[str, list[tuple[int, int, int]]] = {}
        for i, h in enumerate(hashes):
            loc = idx.items.get(h)
            if loc is None:
                raise CorruptCheckpointError(str(self.runs_dir), 0, f"stored item {h} is missing")
            todo.setdefault(loc[0], []).append((loc[1], loc[2], i))
        for run, wanted in todo.items():
            wanted.sort()
            path = self.run_file(run)
            lines = self.streams.read_at(run, [off for off, _, _ in wanted])
            for (off, line, i), raw in zip(wanted, lines, strict=True):
                try:
                    body = check_line(path, raw, line, off)
                except CorruptRecordError as err:
                    raise CorruptCheckpointError(err.path, err.line, err.reason) from err
                found: Any = _item_hash(body)
                if found is None:  # an item record not in `item_frame`'s form (an older writer's)
                    rec = orjson.loads(body)
                    found = rec.get("h") if isinstance(rec, dict) else None
                if found != hashes[i]:
                    raise CorruptCheckpointError(str(path), line, f"item {hashes[i]} is not where the index says")
                out[i] = raw
        return out

    def remove(self) -> None:
        """Delete the whole session (its folder, or its rows)."""
        self.forget()
        self.streams.remove()

    # -- pins ----------------------------------------------------------------------------------

    def pins(self) -> set[tuple[str, str]]:
        """Pinned (checkpoint_ns, checkpoint_id) pairs."""
        return self._pins()[0]

    def _pins(self) -> tuple[set[tuple[str, str]], Any]:
        data, version = self.streams.load_doc(PINS_DOC)
        return {(str(ns), str(i)) for ns, i in (data or {}).get("pinned", [])}, version

    def update_pins(self, change: Callable[[set[tuple[str, str]]], set[tuple[str, str]]]) -> None:
        """Replace the pinned set with `change(pinned)`, compared-and-swapped (another process's
        change in between is read again and `change` applied to it)."""
        while True:
            pins, version = self._pins()
            if self.streams.save_doc(PINS_DOC, {"pinned": sorted([list(p) for p in change(pins)])}, version):
                return

    def set_pins(self, pins: set[tuple[str, str]]) -> None:
        """Replace the pinned set."""
        self.update_pins(lambda _: pins)


def item_frame(h: str, raw: bytes) -> bytes:
    """The framed item record holding JSON `raw` under its content hash `h`.

    The item record's body is built here from the value's JSON bytes as stored (no re-encoding of
    a large value); its framing is `records.frame`'s. `_item_hash` reads the hash back from a
    verified body of this form: the two are the one place that knows the item body's byte order."""
    return frame(b'{"k":"i","schema_version":%d,"h":"%s","v":%s}' % (ITEM_SCHEMA_VERSION, h.encode(), raw))


_ITEM_HEAD = b'{"k":"i","schema_version":%d,"h":"' % ITEM_SCHEMA_VERSION


def _item_hash(body: bytes) -> str | None:
    """The hash of an item record as `item_frame` writes it (None for any other record)."""
    if not body.startswith(_ITEM_HEAD):
        return None
    end = body.find(b'","v":', len(_ITEM_HEAD))
    return body[len(_ITEM_HEAD) : end].decode("ascii") if end != -1 else None


def task_pairs(rec: dict[str, Any]) -> dict[str, list[Any]]:
    """A checkpoint record's `task_state` as {channel: [version, home]}, from any on-disk form."""
    versions = rec.get("channel_versions") or {}
    homes = rec.get("homes") or []
    out: dict[str, list[Any]] = {}
    for ch, v in (rec.get("task_state") or {}).items():
        if type(v) is int:
            out[ch] = [versions.get(ch), homes[v]]
        elif isinstance(v, str):
            out[ch] = [versions.get(ch), v]
        else:
            out[ch] = v
    return out


def write_pairs(rec: dict[str, Any]) -> list[list[Any]]:
    """A checkpoint record's `parent_writes` as `[task_id, idx]` pairs, from either on-disk form."""
    return [[w[0], i] for w in rec.get("parent_writes") or [] for i in w[1:]]


def disk_form(rec: dict[str, Any]) -> dict[str, Any]:
    """The record as written (schema 4): a checkpoint's `task_state` maps a channel whose version is
    the one in `channel_versions` (every channel, as the saver writes them) to the index of its
    home in `homes`, and `parent_writes` groups the indexes of each task."""
    if rec.get("k") != "c":
        return rec
    versions = rec.get("channel_versions") or {}
    homes: list[str] = []
    at: dict[str, int] = {}
    compact: dict[str, Any] = {}
    for ch, v in rec["task_state"].items():
        if type(v) is list and len(v) == 2 and isinstance(v[1], str) and ch in versions and v[0] == versions[ch]:
            if v[1] not in at:
                at[v[1]] = len(homes)
                homes.append(v[1])
            compact[ch] = at[v[1]]
        else:
            compact[ch] = v
    grouped: dict[str, list[Any]] = {}
    for task, idx in rec.get("parent_writes") or []:
        grouped.setdefault(task, [task]).append(idx)
    return {
        **rec,
        "task_state": compact,
        "homes": homes,
        "parent_writes": list(grouped.values()),
        "schema_version": HISTORIES_SCHEMA_VERSION if rec.get("histories") else SCHEMA_VERSION,
    }


def _parse(body: bytes, path: Path, line: int) -> dict[str, Any]:
    return _checked(orjson.loads(body), path, line)


def _checked(rec: Any, path: Path, line: int) -> dict[str, Any]:
    version = rec.get("schema_version") if isinstance(rec, dict) else None
    if version not in READABLE_SCHEMA_VERSIONS:
        raise UnknownSchemaError(
            f"{path}:{line}: checkpoint record has schema_version {version!r}; this saver reads "
            f"{sorted(READABLE_SCHEMA_VERSIONS)}. Read the thread with the version of the saver that wrote "
            "it; nothing was changed on disk."
        )
    if rec.get("k") == "c":
        try:
            rec["task_state"] = task_pairs(rec)
            rec["parent_writes"] = write_pairs(rec)
        except (IndexError, TypeError, KeyError) as err:
            raise CorruptCheckpointError(str(path), line, f"checkpoint record is malformed ({err!r})") from err
        rec.pop("homes", None)
    return rec


def _add_item(idx: SessionIndex, h: str, run: str, off: int, line: int) -> None:
    old = idx.items.get(h)
    if old is not None and old[0] != run:
        idx.dup_items.setdefault(old[0], []).append((h, old[1], old[2]))
    idx.items[h] = (run, off, line)


def _fill(idx: SessionIndex, loc: CpLoc, rec: dict[str, Any]) -> None:
    """Complete `loc` from its checkpoint record; only the newest `_DETAILED` stay complete (the
    others are read again when asked for: a long run's index must not hold every checkpoint's maps)."""
    key = (rec["checkpoint_ns"], rec["checkpoint_id"])
    loc.homes = {ch: h for ch, (_, h) in rec["task_state"].items()}
    loc.versions = rec["channel_versions"]
    loc.missing = [ch for ch in rec.get("delta_channels", []) if ch not in loc.homes]
    idx.detailed.append(key)
    while len(idx.detailed) > _DETAILED:
        old = idx.cps.get(idx.detailed.popleft())
        if old is not None and old is not loc:
            old.homes = old.versions = old.missing = None


def _versions_into(by_version: dict[tuple[str, str, str], str], ns: str, cp_id: str, rec: dict[str, Any]) -> None:
    for ch, (ver, home) in rec["task_state"].items():
        if home == cp_id:
            by_version[(ns, ch, version_key(ver))] = cp_id


def _apply(idx: SessionIndex, run: str, off: int, line: int, rec: dict[str, Any], fill: bool = False) -> None:
    """Index one record; a checkpoint's homes and versions only when `fill` (a put: the next put
    asks for its parent's), else read from the record when first needed (`SessionStore.detail`)."""
    if rec["k"] == "i":
        _add_item(idx, rec["h"], run, off, line)
        return
    ns, cp_id = rec["checkpoint_ns"], rec["checkpoint_id"]
    if rec["k"] == "c":
        parent = rec.get("parent_checkpoint_id")
        if (ns, cp_id) not in idx.cps:
            idx.counts[run] = idx.counts.get(run, 0) + 1
        loc = idx.cps[(ns, cp_id)] = CpLoc(run, off, line, parent, rec.get("run_id_meta"))
        if fill:
            _fill(idx, loc, rec)
        if idx.by_version is not None:
            _versions_into(idx.by_version, ns, cp_id, rec)
        if parent:
            idx.children[(ns, parent)] = idx.children.get((ns, parent), 0) + 1
        if cp_id > idx.latest.get(ns, ""):
            idx.latest[ns] = cp_id
    else:
        idxs = [int(w[0]) for w in rec["writes"]]
        idx.writes.setdefault((ns, cp_id), []).append(WriteLoc(run, off, line, str(rec["task_id"]), idxs))
