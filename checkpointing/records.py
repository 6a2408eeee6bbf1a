"""THE record log: framing, checksum, scan, torn-tail rule and group commit for every JSONL file.

A record is a JSON object on one line. Its first field is `"_crc"`: the CRC32 (8 hex digits) of
the bytes of the record's JSON *as written* without that field, so a reader verifies a line
without re-encoding it:

    {"_crc":"1a2b3c4d","k":"c",...}\\n      body checked = b'{"k":"c",...}'

Damage rules (the same for the saver, the event log, the tool journal and the session store):
- Only an incomplete last line (no terminating newline) is a torn tail. A read skips it and
  changes nothing on disk; `cut_torn_tail` (called by an appender before its first append, and
  by recovery / doctor) moves it aside to `<file>.broken` and truncates the file.
- A complete line whose checksum fails, anywhere including the last line, is corruption:
  `CorruptRecordError` naming file and line. A last line without a newline whose bytes minus the
  last one verify is also corruption (a crash can only leave a prefix of `record + newline`).
- Reads never modify files.

Durability: `RecordLog(fsync="always")` makes an append durable before it returns, unless a
`CommitGroup` is open (`with group.deferred(): ...`): then the appends of every log joined to the
group reach disk at the group's one barrier when the outermost block exits. `fsync="batch"`
leaves it to `sync()` / the group's `barrier()` or the OS. `fsync_count()` counts fsyncs (bench).
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from checkpointing.errors import CorruptRecordError, OldFormatError

FsyncPolicy = Literal["always", "batch", "never"]
CRC_FIELD = "_crc"
_PREFIX = b'{"_crc":"'
_HEAD = len(_PREFIX) + 9  # prefix + 8 hex digits + closing quote

# Fault injection (crash drills): when set, called with (fd, bytes) just before each append's write,
# so a drill can write part of the record and kill the process. Off (None) in normal operation.
write_hook: Callable[[int, bytes], None] | None = None

_fsyncs = 0
_fsync_lock = threading.Lock()


def fsync_fd(fd: int) -> None:
    """fsync `fd`, counted (see `fsync_count`)."""
    global _fsyncs
    os.fsync(fd)
    with _fsync_lock:
        _fsyncs += 1


def fsync_count() -> int:
    """fsyncs issued through this module since the process started (for benchmarks)."""
    return _fsyncs


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, compact, UTF-8); for digests, not for framing."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes of `obj` (key order as given)."""
    return orjson.dumps(obj)


def loads(data: bytes | str) -> Any:
    """Parse JSON."""
    return orjson.loads(data)


def _crc(body: bytes) -> bytes:
    return b"%08x" % (zlib.crc32(body) & 0xFFFFFFFF)


def frame(body: bytes) -> bytes:
    """Frame the JSON object bytes `body` as one checksummed line."""
    if not body.startswith(b"{") or not body.endswith(b"}"):
        raise ValueError("a record must be a JSON object")
    rest = b"}" if body == b"{}" else b"," + body[1:]
    return _PREFIX + _crc(body) + b'"' + rest + b"\n"


def encode_record(record: dict[str, Any]) -> bytes:
    """Frame one record: its JSON with the checksum first, newline-terminated."""
    if CRC_FIELD in record:
        raise ValueError(f"record may not carry the reserved field {CRC_FIELD!r}")
    return frame(orjson.dumps(record))


def verify_line(line: bytes) -> bytes:
    """The checked JSON body of one framed line (without its newline). Raises ValueError when bad."""
    if not line.startswith(_PREFIX) or len(line) < _HEAD + 1 or line[_HEAD - 1 : _HEAD] != b'"':
        raise ValueError("line is not a framed record")
    tail = line[_HEAD:]
    if tail == b"}":
        body = b"{}"
    elif tail.startswith(b","):
        body = b"{" + tail[1:]
    else:
        raise ValueError("line is not a framed record")
    stored = line[len(_PREFIX) : _HEAD - 1]
    if stored != _crc(body):
        raise ValueError(f"checksum mismatch (stored {stored.decode('ascii', 'replace')})")
    return body


def decode_record(line: bytes) -> dict[str, Any]:
    """Parse and verify one framed line (without its newline). Raises ValueError when bad."""
    obj = orjson.loads(verify_line(line))
    if not isinstance(obj, dict):
        raise ValueError("record is not a JSON object")
    return obj


def _old_frame(line: bytes) -> bool:
    """Whether `line` is a record of on-disk format 1 (canonical JSON, `_crc` last) that verifies."""
    if not line.endswith(b'"}') or b',"_crc":"' not in line[-22:]:
        return False
    body = line[: line.rfind(b',"_crc":"')] + b"}"
    try:
        obj = orjson.loads(body)
        stored = orjson.loads(line)["_crc"]
    except orjson.JSONDecodeError:
        return False
    canonical = json_std_canonical(obj)
    return isinstance(stored, str) and stored.encode() == _crc(canonical)


def json_std_canonical(obj: Any) -> bytes:
    """Format 1's canonical JSON (the standard library's, non-ASCII kept)."""
    import json

    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass
class Scan:
    """What a scan of one file found: verified record bodies and where the good part ends."""

    path: Path
    records: list[tuple[int, bytes]] = field(default_factory=list)
    good: int = 0
    size: int = 0

    @property
    def torn(self) -> bool:
        """Whether the file ends with an incomplete last line."""
        return self.good < self.size


def scan_bytes(path: Path, data: bytes, start: int = 0, first_line: int = 1) -> Scan:
    """Verify every line of `data` (the file's bytes from offset `start`); apply the torn-tail rule."""
    out = Scan(path, size=start + len(data))
    pos, line_no, size = 0, first_line - 1, len(data)
    while pos < size:
        line_no += 1
        nl = data.find(b"\n", pos)
        if nl == -1:
            tail = data[pos:]
            try:
                verify_line(tail[:-1])
            except ValueError:
                break  # a real torn tail: a prefix of a record
            raise CorruptRecordError(str(path), line_no, "last record's terminator is damaged")
        try:
            body = verify_line(data[pos:nl])
        except ValueError as err:
            if _old_frame(data[pos:nl]):
                raise OldFormatError(str(path), line_no) from err
            raise CorruptRecordError(str(path), line_no, str(err)) from err
        out.records.append((start + pos, body))
        pos = nl + 1
    out.good = start + pos
    return out


def scan(path: Path, start: int = 0, first_line: int = 1) -> Scan:
    """Scan `path` from byte `start` (missing file: empty scan). Never modifies the file."""
    try:
        with open(path, "rb") as fh:
            if start:
                fh.seek(start)
            data = fh.read()
    except FileNotFoundError:
        return Scan(path)
    return scan_bytes(path, data, start, first_line)


def read_records_with_offsets(path: Path, repair: bool = False) -> list[tuple[int, dict[str, Any]]]:
    """Every record of `path` with its byte offset; a torn tail is skipped (cut only if `repair`)."""
    s = scan(path)
    if repair and s.torn:
        cut_torn_tail(path, s.good)
    return [(off, orjson.loads(body)) for off, body in s.records]


def read_records(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """Every record of `path` (missing file: empty list); a torn tail is skipped."""
    return [rec for _, rec in read_records_with_offsets(path, repair)]


def read_record_at(path: Path, offset: int, line_hint: int = -1) -> dict[str, Any]:
    """Read and verify the single record that starts at byte `offset`."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        line = fh.readline()
    if not line.endswith(b"\n"):
        raise CorruptRecordError(str(path), line_hint, f"record at byte {offset} is incomplete")
    try:
        return decode_record(line[:-1])
    except ValueError as err:
        raise CorruptRecordError(str(path), line_hint, f"record at byte {offset}: {err}") from err


def cut_torn_tail(path: Path, good: int | None = None) -> bool:
    """Move an incomplete last line aside to `<file>.broken` and truncate; True if one was cut.

    The explicit repair step (appenders before their first append, recovery, `doctor --repair`);
    raises `CorruptRecordError` when the file is damaged elsewhere.
    """
    if good is None:
        s = scan(path)
        if not s.torn:
            return False
        good = s.good
    data = path.read_bytes()
    if good >= len(data):
        return False
    broken = path.with_name(path.name + ".broken")
    with open(broken, "ab") as fh:
        fh.write(data[good:])
        fh.flush()
        fsync_fd(fh.fileno())
    with open(path, "r+b") as fh:
        fh.truncate(good)
        fh.flush()
        fsync_fd(fh.fileno())
    return True


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fsync_fd(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Write `data` to `path` via temp file + fsync + rename + fsync of the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if durable:
            fsync_fd(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


class CommitGroup:
    """One durability barrier for appends to several logs (saver, event log, journal).

    Inside `with group.deferred():` an `fsync="always"` append only marks its file dirty; the
    outermost block's exit fsyncs each dirty file once (and each new file's folder). Outside a
    block, appends behave as their policy says. Thread-safe; blocks may nest.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._dirty: dict[Path, bool] = {}

    @property
    def active(self) -> bool:
        """Whether a deferred block is open."""
        return self._depth > 0

    def note(self, path: Path, new_file: bool = False) -> None:
        """Mark `path` as appended to (and its folder, when the file is new)."""
        with self._lock:
            self._dirty[path] = self._dirty.get(path, False) or new_file

    @contextmanager
    def deferred(self) -> Iterator[CommitGroup]:
        """Defer fsyncs of joined logs to one barrier at the end of the outermost block."""
        with self._lock:
            self._depth += 1
        try:
            yield self
        finally:
            with self._lock:
                self._depth -= 1
                last = self._depth == 0
            if last:
                self.barrier()

    def barrier(self) -> int:
        """fsync every file appended to since the last barrier; returns how many."""
        with self._lock:
            dirty, self._dirty = self._dirty, {}
        for path, new in dirty.items():
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                fsync_fd(fd)
            finally:
                os.close(fd)
            if new:
                fsync_dir(path.parent)
        return len(dirty)


class RecordLog:
    """An append-only JSONL file of framed records.

    Appends use `O_APPEND` and one `write` call per batch, so concurrent appenders on one host
    never interleave bytes. Before its first append the log cuts a torn tail left by a crash
    (moved aside to `.broken`), or the next record would fuse with it.
    """

    def __init__(self, path: Path, fsync: FsyncPolicy = "always", group: CommitGroup | None = None) -> None:
        self.path = path
        self.fsync = fsync
        self.group = group
        self._lock = threading.Lock()
        self._checked = False

    def _ensure_clean_tail(self) -> None:
        if not self._checked:
            if self.path.exists():
                cut_torn_tail(self.path)
            self._checked = True

    def append(self, record: dict[str, Any]) -> int:
        """Append one record; returns the byte offset it was written at."""
        return self.append_frames([encode_record(record)])[0]

    def append_many(self, records: list[dict[str, Any]]) -> list[int]:
        """Append several records in one write; returns their byte offsets."""
        return self.append_frames([encode_record(r) for r in records])

    def append_frames(self, frames: list[bytes]) -> list[int]:
        """Append already framed lines in one write; returns their byte offsets."""
        with self._lock:
            self._ensure_clean_tail()
            new = not self.path.exists()
            if new:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                start = os.lseek(fd, 0, os.SEEK_END)
                blob = b"".join(frames)
                if write_hook is not None:
                    write_hook(fd, blob)
                os.write(fd, blob)
                self._durable(fd, new)
            finally:
                os.close(fd)
        offsets, pos = [], start
        for f in frames:
            offsets.append(pos)
            pos += len(f)
        return offsets

    def _durable(self, fd: int, new: bool) -> None:
        if self.fsync == "never":
            return
        if self.group is not None and (self.fsync == "batch" or self.group.active):
            self.group.note(self.path, new)
            return
        if self.fsync == "always":
            fsync_fd(fd)
            if new:
                fsync_dir(self.path.parent)

    def sync(self) -> None:
        """Make every append so far durable."""
        if self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                fsync_fd(fd)
            finally:
                os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        """Every record (a torn tail skipped, not cut)."""
        return read_records(self.path)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.read())
