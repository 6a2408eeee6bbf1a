"""One session's records kept indexed: the index built, caught up and persisted, and appends.

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

import itertools
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

import orjson

from checkpointing import indexfile
from checkpointing._saver_format import checked_record, disk_form, item_frame, item_hash, parse_record
from checkpointing._saver_index import (
    CpLoc,
    SessionIndex,
    add_item,
    apply_record,
    fill_detail,
    restore,
    saved_state,
    versions_into,
)
from checkpointing._saver_reads import RecordReads
from checkpointing.exceptions import CorruptCheckpointError, CorruptRecordError
from checkpointing.record_log import Durable
from checkpointing.records import FsyncPolicy, frame
from checkpointing.store.base import SessionStreams

if TYPE_CHECKING:  # the memo's module loads langchain_core, which read commands must not
    from checkpointing._saver_prefix import ListMemo

_SCAN_WINDOW = 1024 * 1024
"""Bytes of a run file indexed at a time (opening a long session, or after a rewrite)."""
_SAVE_EVERY = 256 * 1024
"""A run's index is persisted when the file grew this much (or by half) since it last was."""
PINS_DOC = "pins.json"
"""The document holding the pinned checkpoints (`layout.PINS_FILE` in a session folder)."""


class SessionStore(RecordReads):
    """Read and append the records of one session; keeps its index in memory."""

    def __init__(self, streams: SessionStreams) -> None:
        super().__init__(streams)
        self.tenant = streams.tenant
        self.key = streams.key
        self._idx: SessionIndex | None = None
        self._checked = False
        self._saved: dict[str, int] = {}  # run -> end of the file its persisted index covers
        self._saved_due: set[str] = set()  # runs appended to since their index was persisted
        # id(message) -> (message, its stored form, its fields' values, its item hash or None): each
        # message object is encoded and hashed once.
        self.memo: dict[int, tuple[Any, Any, tuple[Any, ...], str | None]] = {}
        # id(first reference) -> (the chunk's references, its hash): see `_saver_spill._chunked`.
        self.chunk_memo: dict[int, tuple[tuple[Any, ...], str]] = {}
        # (checkpoint_ns, channel) -> the head of the channel's last list stored (`_saver_prefix`).
        self.lists: dict[Hashable, ListMemo] = {}

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
            while end < size:
                end, lines, more = self._scan_window(idx, run, path, end, lines)
                if not more:
                    break
        return None

    def _scan_window(self, idx: SessionIndex, run: str, path: Any, end: int, lines: int) -> tuple[int, int, bool]:
        """Index the records of one window of run file `run` from `end` (its `lines` records before
        it); the new (end, lines) and whether any record was found (a long file is indexed a
        window at a time: its bytes and record bodies are never all in memory at once)."""
        try:
            found = self.streams.scan(run, end, lines + 1, _SCAN_WINDOW)
        except CorruptRecordError as err:
            raise CorruptCheckpointError(err.path, err.line, err.reason) from err
        last = -1
        for i, (off, body) in enumerate(found.records):
            h = item_hash(body)
            if h is not None:  # an item's value is parsed when it is read, not to index it
                add_item(idx, h, run, off, lines + 1 + i)
                continue
            rec = parse_record(body, path, lines + 1 + i)
            apply_record(idx, run, off, lines + 1 + i, rec)
            last = i
        if last >= 0:
            off, body = found.records[last]
            after = found.records[last + 1][0] if last + 1 < len(found.records) else found.good
            idx.lasts[run] = (off, indexfile.record_crc(body), after, lines + last + 1)
        idx.ends[run] = (found.good, lines + len(found.records))
        return found.good, lines + len(found.records), bool(found.records)

    # -- the persisted index -------------------------------------------------------------------

    def _restore(self, idx: SessionIndex, run: str, snap: indexfile.Snapshot) -> tuple[int, int] | None:
        """Index run file `run` from its persisted index; the (end, lines) it covers, or None (and
        nothing indexed) when the index is not of the shape `save_index` writes."""
        if not restore(idx, run, snap, self.run_file(run)):
            return None
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
            state, picks = saved_state(idx, r)
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
        # `checked_record` converts a checkpoint's task_state in place: on a copy, the caller keeps its records.
        checked = [
            checked_record(rec if rec.get("k") == "i" else dict(rec), path, line)
            for line, (_, rec) in enumerate(recs, 1)
        ]
        try:
            for line, ((off, _), rec) in enumerate(zip(recs, checked, strict=True), 1):
                apply_record(idx, run, off, line, rec)
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
        self.clear_caches()
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
            add_item(idx, h, run, offs[i], lines + 1 + i)
        lines += len(hashes)
        if record is not None:
            apply_record(idx, run, offs[-1], lines + 1, record, fill=True)
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
            fill_detail(self.index, loc, self.read(loc.run, loc.off, loc.line))
        return loc

    def home_of(self, ns: str, ch: str, version: str) -> str | None:
        """The checkpoint whose record stores channel `ch` at `version` (a `version_key`), if any."""
        idx = self.index
        if idx.by_version is None:  # first use: every checkpoint record is read once
            built: dict[tuple[str, str, str], str] = {}
            for (cp_ns, cp_id), loc in list(idx.cps.items()):
                rec = self.read(loc.run, loc.off, loc.line)
                versions_into(built, cp_ns, cp_id, rec)
            idx.by_version = built
        return idx.by_version.get((ns, ch, version))

    def sync(self) -> None:
        """Make every append durable (fsync the run files) and persist their indexes."""
        self.streams.sync()
        self.save_index()

    def close_files(self) -> None:
        """Close the run files' append descriptors (they reopen on the next append)."""
        self.streams.close()

    # -- rewrites --------------------------------------------------------------------------------

    def forget(self) -> None:
        """Drop open logs, caches and the index (after files were rewritten or removed)."""
        self.close_files()
        self.clear_caches()
        self._idx = None
        self._saved.clear()
        self._saved_due.clear()

    def replace_run(self, run: str, records: list[dict[str, Any]], head: Iterable[bytes] = ()) -> None:
        """Atomically replace a run file with the framed lines `head` (verified item records copied
        as they are, see `iter_item_frames`; an iterator is written as it yields) then `records` (or
        remove the run when both are empty)."""
        self.streams.replace(run, itertools.chain(head, (frame(orjson.dumps(disk_form(r))) for r in records)))

    def items_in(self, run: str) -> list[str]:
        """The hashes of the item records run file `run` holds, in file order."""
        idx = self.index
        found = [(loc[1], h) for h, loc in idx.items.items() if loc[0] == run]
        found += [(off, h) for h, off, _ in idx.dup_items.get(run, ())]
        return list(dict.fromkeys(h for _, h in sorted(found)))

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
