"""Verified, cached reads of one session's records at the places its index gives: a checkpoint,
its pending writes, items one by one or in bulk (each run file read in offset order), an item
record's bytes as they are (for a rewrite to copy), and every record of a run file.

A read never modifies a file: a damaged record raises `CorruptCheckpointError` naming file and
line, and a record that is not the one the index says (an index is a cache) too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from checkpointing._saver_format import ITEM_HEAD, item_hash, parse_record
from checkpointing._saver_index import SessionIndex
from checkpointing.exceptions import CorruptCheckpointError, CorruptRecordError
from checkpointing.records import check_line
from checkpointing.store.base import SessionStreams

_CACHE_BYTES = 1024 * 1024
"""Parsed records kept per session, by their size on disk (parsed, they take several times more).
A run's own reads are of its newest records (a put's parent, the DeltaChannel history back to the
last snapshot, re-read per step only for the tail); a larger cache made a long turn's memory grow."""


_FRAMES_BATCH = 64
"""Item records `iter_item_frames` reads at a time (each run file read once per batch)."""


class RecordReads:
    """Reads of one session's records (`SessionStore` adds its index and appends)."""

    def __init__(self, streams: SessionStreams) -> None:
        self.streams = streams
        self.runs_dir = streams.label
        self._cache: OrderedDict[tuple[str, int], tuple[dict[str, Any], int]] = OrderedDict()
        self._cache_bytes = 0
        # item hash -> a message decoded, or another item's stored JSON; see `_saver_load.ItemLoader.load`.
        self.decoded: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.decoded_bytes = 0
        self.walk: object | None = None  # the last DeltaChannel history walk (`_saver_walk.HistoryWalk`)

    @property
    def index(self) -> SessionIndex:
        """The session's index (`SessionStore.index`)."""
        raise NotImplementedError

    def run_file(self, run: str) -> Path:
        """The name of a run's stream (for files, the path of its log)."""
        return self.streams.path(run)

    def clear_caches(self) -> None:
        """Forget every record and decoded value read so far."""
        self._cache.clear()
        self._cache_bytes = 0
        self.decoded.clear()
        self.decoded_bytes = 0
        self.walk = None

    def read(self, run: str, off: int, line: int, cache: bool = True) -> dict[str, Any]:
        """The record at `off` of a run file (cached unless not `cache`), verified by checksum."""
        key = (run, off)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit[0]
        return self._verified(self.streams.read_at(run, [off])[0], run, off, line, cache)

    def _verified(self, raw: bytes, run: str, off: int, line: int, cache: bool = True) -> dict[str, Any]:
        """Verify (`records.check_line`) and parse the line read at `off` of a run file, and cache
        it (unless not `cache`: items read in bulk are decoded once by their caller, which keeps
        what it needs)."""
        path = self.run_file(run)
        try:
            rec = parse_record(check_line(path, raw, line, off), path, line)
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

    def prefetch(self, places: Iterable[tuple[str, int, int]]) -> None:
        """Read the records at `places` ((run, offset, line)) that are not cached into the cache, each
        run file opened once (a walk over many records, e.g. retention's history walk, then finds
        them there instead of opening the file once per record)."""
        todo: dict[str, list[tuple[int, int]]] = {}
        for run, off, line in places:
            if (run, off) not in self._cache:
                todo.setdefault(run, []).append((off, line))
        for run, wanted in todo.items():
            wanted = sorted(set(wanted))
            raws = self.streams.read_at(run, [off for off, _ in wanted])
            for (off, line), raw in zip(wanted, raws, strict=True):
                self._verified(raw, run, off, line)

    def doc(self, ns: str, cp_id: str, cache: bool = True) -> dict[str, Any] | None:
        """The checkpoint record (ns, cp_id), or None when it is not in this session (a walk
        over many ancestors reads them without `cache`: it would only push the newest out)."""
        loc = self.index.cps.get((ns, cp_id))
        if loc is None:
            return None
        rec = self.read(loc.run, loc.off, loc.line, cache)
        return self._keyed(rec, (loc.run, loc.off, loc.line), "checkpoint_id", cp_id)

    def writes_records(self, ns: str, cp_id: str, cache: bool = True) -> list[dict[str, Any]]:
        """The pending-writes records of checkpoint (ns, cp_id), in append order."""
        return [
            self._keyed(self.read(w.run, w.off, w.line, cache), (w.run, w.off, w.line), "checkpoint_id", cp_id)
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
            parse_record(body, path, i + 1)
            for i, (_, body) in enumerate(found.records)
            if items or not body.startswith(ITEM_HEAD)
        ]

    def records_at(self, run: str, places: list[tuple[int, int]]) -> list[dict[str, Any]]:
        """The records at the (offset, line) `places` of a run file, in file order, each verified and
        none cached: a rewrite parses only the records it keeps, not every record of a long run
        (parsing them all left the process's memory fragmented and its peak higher)."""
        places = sorted(places)
        raws = self.streams.read_at(run, [off for off, _ in places]) if places else []
        return [self._verified(raw, run, off, line, cache=False) for (off, line), raw in zip(places, raws, strict=True)]

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

    def iter_item_frames(self, hashes: Iterable[str]) -> Iterator[bytes]:
        """The framed lines of the item records `hashes`, each verified, in the order asked (a
        rewrite copies them byte for byte instead of decoding and encoding every value again),
        read `_FRAMES_BATCH` at a time as the caller takes them (a rewrite streams a long run's
        items into its new file instead of holding them all)."""
        batch: list[str] = []
        for h in hashes:
            batch.append(h)
            if len(batch) >= _FRAMES_BATCH:
                yield from self._frames(batch)
                batch = []
        if batch:
            yield from self._frames(batch)

    def _frames(self, hashes: list[str]) -> list[bytes]:
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
                found: Any = item_hash(body)
                if found is None:  # an item record not in `item_frame`'s form (an older writer's)
                    rec = orjson.loads(body)
                    found = rec.get("h") if isinstance(rec, dict) else None
                if found != hashes[i]:
                    raise CorruptCheckpointError(str(path), line, f"item {hashes[i]} is not where the index says")
                out[i] = raw
        return out
