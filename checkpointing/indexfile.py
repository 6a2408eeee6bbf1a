"""A record log's index, persisted beside it so that opening a long log reads only its tail.

    <log>.idx    one framed record: {"v", "end", "lines", "last", "crc", "state"}

The owner of a log (the saver's run files, the event log) builds an in-memory index by scanning
the log. `save` writes that index, as the JSON `state` the owner chooses, together with what it
covers: the log's bytes `[0, end)` holding `lines` records, the last of which starts at `last`
and carries checksum `crc`, as the owner itself indexed it (never read back from the file at save
time, so an owner whose view went stale describes the old file, not the new one). `load`
returns it only while it still describes the log: at least `end` long, and the record ending at
`end` intact with that checksum (a log rewritten, replaced or cut and grown again fails this; a
copy of the folder still passes, so a restored backup keeps its index). The owner then indexes
only the bytes past `end`, as it catches up after another process appended. Log rewrites remove
the index first.

The file is a cache, never the data: it is written without fsync (a crash leaves it stale,
missing or torn, and each of those is detected), only by a process that appended to the log
(reads never write), and whatever it says is checked again when used: every record read through
it is verified by its own checksum and compared with the key the index gave. A damaged or stale
index file is ignored (the log is scanned as if it were absent) and replaced at the next save.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from checkpointing.exceptions import CorruptRecordError
from checkpointing.fsyncs import atomic_write
from checkpointing.layout import INDEX_SUFFIX, index_file
from checkpointing.records import check_line, frame, read_line_at, verify_file
from checkpointing.records import record_crc as record_crc  # the owners' name for it since before records had it

SUFFIX = INDEX_SUFFIX
VERSION = 1
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """A persisted index that still describes its log."""

    end: int
    lines: int
    state: Any


def path_of(log_path: Path) -> Path:
    """Where the index of `log_path` is kept (`layout.index_file`)."""
    return index_file(log_path)


def save(
    log_path: Path,
    end: int,
    lines: int,
    last: int,
    crc: str,
    state: Any,
    probes: Sequence[tuple[int, str]] = (),
) -> None:
    """Persist the owner's index of `log_path[:end]`: `lines` records, the last one at `last` with
    checksum `crc` (see `record_crc`), and `probes`: (offset, checksum) of a few more records the
    owner indexed, checked too (a rewrite that kept the last record where it was moved others).
    Best effort: an index that cannot be written is only a slower next open."""
    try:
        atomic_write(path_of(log_path), encode(end, lines, last, crc, state, probes), durable=False)
    except OSError as err:
        log.debug("index of %s not saved: %s", log_path, err)


def encode(end: int, lines: int, last: int, crc: str, state: Any, probes: Sequence[tuple[int, str]] = ()) -> bytes:
    """The persisted index as one framed line (what `save` writes; a store keeps it where it likes)."""
    head = {"v": VERSION, "end": end, "lines": lines, "last": last, "crc": crc, "probes": list(probes)}
    return frame(orjson.dumps({**head, "state": state}))


@dataclass(frozen=True)
class Saved:
    """A persisted index as read back, not yet checked against its log."""

    end: int
    lines: int
    last: int
    crc: str
    probes: list[tuple[int, str]]
    state: Any


def decode(where: Path, raw: bytes, log_name: Path | str) -> Saved | None:
    """The persisted index in `raw` (read from `where`, the index of `log_name`); None, with a
    warning, when it is damaged or of another version (the log is then scanned instead)."""
    try:
        rec = _parse(verify_file(where, raw))
        end, lines, last, crc = int(rec["end"]), int(rec["lines"]), int(rec["last"]), str(rec["crc"])
        probes = [(int(off), str(c)) for off, c in rec.get("probes") or ()]
        if rec.get("v") != VERSION or not 0 <= last < end or any(not 0 <= off < last for off, _ in probes):
            raise ValueError(f"version {rec.get('v')!r}")
    except CorruptRecordError as err:
        log.warning("index %s is damaged (%s): scanning %s instead", where, err.reason, log_name)
        return None
    except (ValueError, KeyError, TypeError) as err:
        log.warning("index %s is damaged (%s): scanning %s instead", where, err, log_name)
        return None
    return Saved(end, lines, last, crc, probes, rec.get("state"))


def line_is(name: Path, line: bytes, crc: str, length: int | None = None) -> bool:
    """Whether `line` (read from log `name`) is a complete record with checksum `crc` (and
    `length` bytes long, newline included, when given)."""
    if length is not None and len(line) != length:
        return False
    try:
        check_line(name, line)
    except CorruptRecordError:
        return False
    return record_crc(line) == crc


def load(log_path: Path) -> Snapshot | None:
    """The persisted index of `log_path` if it still describes the log, else None."""
    where = path_of(log_path)
    try:
        raw = where.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        log.warning("index %s unreadable (%s): scanning %s instead", where, err, log_path)
        return None
    saved = decode(where, raw, log_path)
    if saved is None:
        return None
    end, last, crc = saved.end, saved.last, saved.crc
    if not _describes(log_path, end, last, crc) or not all(_intact(log_path, off, c) for off, c in saved.probes):
        return None  # stale: the log was rewritten or replaced since (nothing is wrong)
    return Snapshot(end, saved.lines, saved.state)


def _parse(body: bytes) -> Any:
    # Tens of thousands of small lists at once: in a process holding many objects the cyclic
    # collector would run several full passes over the heap while they are built (none can be
    # part of a cycle, so it is paused).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return orjson.loads(body)
    finally:
        if enabled:
            gc.enable()


def _describes(log_path: Path, end: int, last: int, crc: str) -> bool:
    """Whether the log is the one indexed: long enough, and its last indexed record intact."""
    try:
        if os.stat(log_path).st_size < end:
            return False
        line = read_line_at(log_path, last)
    except OSError:
        return False
    return line_is(log_path, line, crc, end - last)  # not ending at `end`: another file


def _intact(log_path: Path, offset: int, crc: str) -> bool:
    """Whether a complete record with checksum `crc` starts at `offset`."""
    try:
        line = read_line_at(log_path, offset)
    except OSError:
        return False
    return line_is(log_path, line, crc)


def remove(log_path: Path) -> None:
    """Drop the persisted index of `log_path` (before the log is rewritten)."""
    try:
        os.unlink(path_of(log_path))
    except FileNotFoundError:
        pass
