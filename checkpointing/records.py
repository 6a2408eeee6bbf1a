"""THE record log: framing, checksum, scan, torn-tail rule and group commit for every JSONL file.

A record is a JSON object on one line. Its first field is `"_crc"`: the CRC32 (8 hex digits) of
the bytes of the record's JSON *as written* without that field, so a reader verifies a line
without re-encoding it:

    {"_crc":"1a2b3c4d","k":"c",...}\\n      body checked = b'{"k":"c",...}'

Damage rules (the same for the saver, the event log, the tool journal, the session store and a
session's inbox and outbox):
- The newline is a record's commit mark: an append returns (and, with fsync, is durable) only
  once the record's bytes *and* its newline are written. A crash can only leave a prefix of
  `record + newline`, so a last line without a newline that is a prefix of a record (the whole
  record but its newline included: its writer was never told it was stored) is a torn tail. A
  read skips it and changes nothing on disk; `torn_tail.cut_torn_tail` (called by an appender before its
  first append, and by recovery / `checkpointing.verify.repair_session`) moves it aside to
  `<file>.broken`, truncates the file and logs a WARNING.
- A last line whose record verifies but whose final byte is not a newline is a committed record
  whose terminator was damaged afterwards (a bit flip; no crash writes it). The record's checksum
  vouches for it, and the line has the length of the intact one, so reads serve it as it was
  (every offset unchanged); `cut_torn_tail` rewrites the byte to a newline (logged) before the
  next append could fuse with it.
- Any other complete line whose checksum fails, anywhere including the last line, is corruption:
  `CorruptRecordError` naming file and line.
- Reads never modify files.
- A small file only ever written whole (`atomic_write`, or once at creation: a lease file, a turn
  file) holds one framed record and has no torn tail: `decode_file` verifies it (a file a crash
  left empty or zeroed is handled by its caller, as it documents).
- A single record read by offset (`read_record_at`, `read_body_at`, `read_lines_at` +
  `check_line`) must be a complete line that verifies: the caller indexed it, so anything else
  is corruption (or the file changed under the reader).

Record bytes are only framed, split into lines and verified here; paths come from
`checkpointing.layout` (`<file>.broken` included).

Durability is not this module's: appends are `checkpointing.record_log.RecordLog`'s, fsyncs and
atomic rewrites `checkpointing.fsyncs`', and a session's group commit `checkpointing.commit_group`'s
(owned by the store: clients ask `SessionStreams.commit`, never a group).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from checkpointing.exceptions import CorruptRecordError, OldFormatError

log = logging.getLogger(__name__)

FsyncPolicy = Literal["always", "batch", "never"]
CRC_FIELD = "_crc"
_PREFIX = b'{"_crc":"'
_HEAD = len(_PREFIX) + 9  # prefix + 8 hex digits + closing quote


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
    if body == b"{}":
        return _PREFIX + _crc(body) + b'"}\n'
    # One copy of the body (a persisted index is a large record: chained `+` copied it three times).
    return b"".join((_PREFIX, _crc(body), b'",', memoryview(body)[1:], b"\n"))


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


def record_crc(framed_or_body: bytes) -> str:
    """The checksum a record carries: read from its framed line (or the line's first bytes), or
    computed from its body."""
    if framed_or_body.startswith(_PREFIX):
        return framed_or_body[len(_PREFIX) : _HEAD - 1].decode("ascii")
    return _crc(framed_or_body).decode("ascii")


def _decoded(path: Path, line: int, body: bytes) -> dict[str, Any]:
    """`body` (verified) parsed; a body that is not a JSON object is corruption of `path`."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise CorruptRecordError(str(path), line, f"record is not JSON ({err})") from err
    if not isinstance(obj, dict):
        raise CorruptRecordError(str(path), line, "record is not a JSON object")
    return obj


def verify_file(path: Path, data: bytes) -> bytes:
    """The checked body of the one record of a file only ever written whole (`atomic_write`).

    Such a file has no torn tail: anything but exactly one complete framed line (`data`, the
    file's bytes) raises `CorruptRecordError` naming `path`, line 1.
    """
    if not data.endswith(b"\n"):
        raise CorruptRecordError(str(path), 1, "the record has no terminating newline")
    try:
        return verify_line(data[:-1])
    except ValueError as err:
        raise CorruptRecordError(str(path), 1, str(err)) from err


def decode_file(path: Path, data: bytes) -> dict[str, Any]:
    """The one record of a file only ever written whole, verified and parsed (see `verify_file`)."""
    return _decoded(path, 1, verify_file(path, data))


def check_line(path: Path, raw: bytes, line: int = -1, offset: int | None = None) -> bytes:
    """The checked body of `raw`, one line of `path` as read (newline included) at byte `offset`.

    The caller located the record (an index), so a line without its newline (the file ends
    there: it changed under the reader) or one that does not verify raises `CorruptRecordError`
    naming the file and `line`.
    """
    if not raw.endswith(b"\n") and (body := _damaged_terminator(raw)) is not None:
        return body  # the file's last record, its newline damaged: the record itself verifies
    if not raw.endswith(b"\n"):
        at = "the record" if offset is None else f"the record at byte {offset}"
        raise CorruptRecordError(str(path), line, f"{at} is incomplete (the file changed under the reader)")
    try:
        return verify_line(raw[:-1])
    except ValueError as err:
        why = str(err) if offset is None else f"record at byte {offset}: {err}"
        raise CorruptRecordError(str(path), line, why) from err


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
    bad_terminator: int | None = None
    """The offset of the last record's damaged newline, when it has one (the record is served)."""

    @property
    def torn(self) -> bool:
        """Whether the file ends with an incomplete last line."""
        return self.good < self.size


def _damaged_terminator(line: bytes) -> bytes | None:
    """The checked body of a last line whose record verifies and whose final byte (its newline) was
    damaged; None for anything else (a torn prefix included)."""
    if len(line) <= _HEAD + 1:
        return None
    try:
        return verify_line(line[:-1])
    except ValueError:
        return None


def scan_bytes(path: Path, data: bytes, start: int = 0, first_line: int = 1) -> Scan:
    """Verify every line of `data` (the file's bytes from offset `start`); apply the torn-tail rule."""
    out = Scan(path, size=start + len(data))
    pos, line_no, size = 0, first_line - 1, len(data)
    while pos < size:
        line_no += 1
        nl = data.find(b"\n", pos)
        if nl == -1:
            body = _damaged_terminator(data[pos:])
            if body is None:
                break  # a prefix of a record: a torn tail (see the module docstring)
            out.records.append((start + pos, body))
            out.bad_terminator = start + size - 1
            pos = size
            break
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


def scan(path: Path, start: int = 0, first_line: int = 1, limit: int | None = None) -> Scan:
    """Scan `path` from byte `start` (missing file: empty scan). Never modifies the file.

    With `limit`, only a window is read: about `limit` bytes, up to the end of the line the limit
    falls in (a longer line is read whole), so the window ends at a line's end or at the file's
    end, and the torn-tail rule applies only there. `size` is then the window's end: a caller
    scans on from `good` until a window ends at the end of the file (a long file read a window
    at a time, never held whole)."""
    try:
        with open(path, "rb") as fh:
            if start:
                fh.seek(start)
            if limit is None:
                data = fh.read()
            else:
                data = fh.read(limit)
                if len(data) == limit and not data.endswith(b"\n"):
                    data += fh.readline()
    except FileNotFoundError:
        return Scan(path)
    return scan_bytes(path, data, start, first_line)


def read_records_with_offsets(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every record of `path` with its byte offset; a torn tail is skipped (`torn_tail` cuts it)."""
    return [(off, orjson.loads(body)) for off, body in scan(path).records]


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every record of `path` (missing file: empty list); a torn tail is skipped."""
    return [rec for _, rec in read_records_with_offsets(path)]


def read_line_at(path: Path, offset: int) -> bytes:
    """The bytes of `path` from `offset` to the end of that line, newline included (not verified:
    see `check_line`; without a newline when the file ends first, b"" at its end)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.readline()


def read_lines_at(path: Path, offsets: Sequence[int], seeks_max: int = 32) -> list[bytes]:
    """`read_line_at` for each of `offsets` (ascending) with one open: a seek each for fewer than
    `seeks_max`, else one read from the first offset to the end of the last line (a long history:
    one read, not a seek each, and never the file past what was asked)."""
    if not offsets:
        return []
    with open(path, "rb") as fh:
        if len(offsets) < seeks_max:
            out = []
            for off in offsets:
                fh.seek(off)
                out.append(fh.readline())
            return out
        start = offsets[0]
        fh.seek(start)
        data = fh.read(offsets[-1] - start) + fh.readline()
    lines = []
    for off in offsets:
        nl = data.find(b"\n", off - start)
        lines.append(data[off - start :] if nl == -1 else data[off - start : nl + 1])
    return lines


def read_body_at(path: Path, offset: int, line_hint: int = -1) -> bytes:
    """The checked body of the single record that starts at byte `offset` (see `check_line`)."""
    return check_line(path, read_line_at(path, offset), line_hint, offset)


def read_record_at(path: Path, offset: int, line_hint: int = -1) -> dict[str, Any]:
    """Read and verify the single record that starts at byte `offset`."""
    return _decoded(path, line_hint, read_body_at(path, offset, line_hint))


def read_first_record(path: Path) -> dict[str, Any] | None:
    """The first record of a log, verified; None when the file is missing or empty. A first line
    without its newline is `CorruptRecordError` here: the caller needs that record whole (an
    event log's header), where a scan would skip it as a torn tail."""
    try:
        raw = read_line_at(path, 0)
    except FileNotFoundError:
        return None
    return _decoded(path, 1, check_line(path, raw, 1)) if raw else None


def crc_at(path: Path, offset: int) -> str:
    """The checksum field of the record that starts at byte `offset` (read, not verified: for an
    owner that verified the record when it indexed it)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        return record_crc(fh.read(_HEAD))


def scan_before(path: Path, line: int) -> Scan:
    """The records of the lines before `line` (the damaged line a scan raised at), verified: what
    is still readable of a damaged file. `good` is where line `line` starts, `size` the file's size."""
    data = path.read_bytes()
    cut = 0
    for _ in range(max(line - 1, 0)):
        cut = data.index(b"\n", cut) + 1
    out = scan_bytes(path, data[:cut])
    out.size = len(data)
    return out


def fsync_policy_ok(value: str) -> FsyncPolicy:
    """Validate a saver's fsync policy name ("always", "checkpoint", "batch")."""
    if value not in ("always", "checkpoint", "batch"):
        raise ValueError(f"fsync must be 'always', 'checkpoint' or 'batch', got {value!r}")
    return value  # type: ignore[return-value]
