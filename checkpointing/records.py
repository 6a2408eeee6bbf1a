"""JSONL record framing: canonical JSON, one record a line, each with a checksum.

A record is a JSON object serialized canonically (sorted keys, no spaces, UTF-8) with an extra
field `"_crc"`: the CRC32 (hex) of the canonical JSON of the record without that field.

Reading applies the torn-tail rule of crash-safe logs: only the very last line may be damaged
(no trailing newline, or a bad checksum / bad JSON); it is moved aside to `<file>.broken` and cut
off. A damaged record anywhere else raises `CorruptRecordError` naming file and line, and nothing
is changed on disk.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from checkpointing.errors import CorruptRecordError

FsyncPolicy = Literal["always", "batch", "never"]
CRC_FIELD = "_crc"

# Fault injection (crash drills): when set, called with (fd, bytes) just before each append's write,
# so a drill can write part of the record and kill the process. Off (None) in normal operation.
write_hook: Callable[[int, bytes], None] | None = None


def canonical_json(obj: Any) -> bytes:
    """Serialize `obj` as canonical JSON bytes (sorted keys, compact, UTF-8, no NaN)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def encode_record(record: dict[str, Any]) -> bytes:
    """Frame one record: canonical JSON with its checksum, newline-terminated."""
    if CRC_FIELD in record:
        raise ValueError(f"record may not carry the reserved field {CRC_FIELD!r}")
    body = canonical_json(record)
    crc = format(zlib.crc32(body) & 0xFFFFFFFF, "08x")
    # The checksum goes last so the body bytes stay the canonical form of the record.
    return body[:-1] + (b"," if len(body) > 2 else b"") + f'"{CRC_FIELD}":"{crc}"}}\n'.encode()


def decode_record(line: bytes) -> dict[str, Any]:
    """Parse and verify one framed line (without its newline). Raises ValueError when bad."""
    obj = json.loads(line.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("record is not a JSON object")
    crc = obj.pop(CRC_FIELD, None)
    if not isinstance(crc, str):
        raise ValueError("record has no checksum")
    expected = format(zlib.crc32(canonical_json(obj)) & 0xFFFFFFFF, "08x")
    if crc != expected:
        raise ValueError(f"checksum mismatch (stored {crc}, computed {expected})")
    return obj


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` via temp file + fsync + rename + fsync of the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _scan(path: Path, data: bytes, repair: bool) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """Split `data` into verified records; returns (records with their byte offsets, good length)."""
    out: list[tuple[int, dict[str, Any]]] = []
    pos = 0
    line_no = 0
    size = len(data)
    while pos < size:
        line_no += 1
        nl = data.find(b"\n", pos)
        last = nl == -1 or nl == size - 1
        end = size if nl == -1 else nl
        try:
            if nl == -1:
                raise ValueError("no newline at end (torn write)")
            rec = decode_record(data[pos:end])
        except (ValueError, UnicodeDecodeError) as err:
            if last:
                if repair:
                    return out, pos
                raise CorruptRecordError(str(path), line_no, f"torn last record: {err}") from err
            raise CorruptRecordError(str(path), line_no, str(err)) from err
        out.append((pos, rec))
        pos = end + 1
    return out, pos


def read_records(path: Path, repair: bool = True) -> list[dict[str, Any]]:
    """Read every record of `path` (missing file: empty list), applying the torn-tail rule."""
    return [rec for _, rec in read_records_with_offsets(path, repair)]


def read_records_with_offsets(path: Path, repair: bool = True) -> list[tuple[int, dict[str, Any]]]:
    """Like `read_records`, also giving each record's byte offset in the file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    recs, good = _scan(path, data, repair)
    if good < len(data):
        cut_torn_tail(path, data, good)
    return recs


def cut_torn_tail(path: Path, data: bytes, good: int) -> None:
    """Keep the damaged tail aside in `<file>.broken` (appended), then truncate the file to `good`."""
    broken = path.with_name(path.name + ".broken")
    with open(broken, "ab") as fh:
        fh.write(data[good:])
        fh.flush()
        os.fsync(fh.fileno())
    with open(path, "r+b") as fh:
        fh.truncate(good)
        fh.flush()
        os.fsync(fh.fileno())


def read_record_at(path: Path, offset: int) -> dict[str, Any]:
    """Read and verify the single record that starts at byte `offset`."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        line = fh.readline()
    if not line.endswith(b"\n"):
        raise CorruptRecordError(str(path), -1, f"record at byte {offset} is incomplete")
    try:
        return decode_record(line[:-1])
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptRecordError(str(path), -1, f"record at byte {offset}: {err}") from err


class RecordLog:
    """An append-only JSONL file of framed records.

    Appends use `O_APPEND` and one `write` call per record, so concurrent appenders on one host
    never interleave bytes. `fsync="always"` makes each append durable before it returns;
    `"batch"` leaves it to `sync()` (called by the owner at a safe point) or the OS.
    """

    def __init__(self, path: Path, fsync: FsyncPolicy = "always") -> None:
        self.path = path
        self.fsync = fsync
        self._lock = threading.Lock()
        self._checked = False

    def _ensure_clean_tail(self) -> None:
        # A torn tail from a crash must be cut before appending, or the next record would fuse with it.
        if not self._checked:
            if self.path.exists():
                read_records_with_offsets(self.path, repair=True)
            self._checked = True

    def append(self, record: dict[str, Any]) -> int:
        """Append one record; returns the byte offset it was written at."""
        return self.append_many([record])[0]

    def append_many(self, records: list[dict[str, Any]]) -> list[int]:
        """Append several records in one write; returns their byte offsets."""
        frames = [encode_record(r) for r in records]
        with self._lock:
            self._ensure_clean_tail()
            new = not self.path.exists()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                start = os.lseek(fd, 0, os.SEEK_END)
                blob = b"".join(frames)
                if write_hook is not None:
                    write_hook(fd, blob)
                os.write(fd, blob)
                if self.fsync == "always":
                    os.fsync(fd)
            finally:
                os.close(fd)
            if new and self.fsync == "always":
                fsync_dir(self.path.parent)
        offsets = []
        pos = start
        for f in frames:
            offsets.append(pos)
            pos += len(f)
        return offsets

    def sync(self) -> None:
        """Make every append so far durable."""
        if self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        """Every record, torn tail cut."""
        with self._lock:
            self._checked = True
            return read_records(self.path, repair=True)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.read())
