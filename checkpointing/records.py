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
  read skips it and changes nothing on disk; `cut_torn_tail` (called by an appender before its
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

Durability: `RecordLog(fsync="always")` makes an append durable before it returns (fdatasync,
shared by concurrent appenders of the same file), unless its `CommitGroup` is held: then the
append only marks its file dirty, with a tier, and reaches disk at the group's next barrier of
that tier (`group_for(directory)` is the process-wide group of a session folder: its saver
files, event log and tool journal join it). `fsync="batch"` leaves it to `sync()` / the
group's `barrier()` or the OS. `fsync_count()` counts fsyncs (bench). A log made with
`keep_open=True` (the saver's run files) keeps its append descriptor open and fdatasyncs through
it, two opens and closes fewer per durable append; its owner closes it when the file may have been
replaced (see `_saver_store`).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from checkpointing.exceptions import CorruptRecordError, OldFormatError
from checkpointing.layout import broken_file

log = logging.getLogger(__name__)

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


def datasync_fd(fd: int) -> None:
    """fdatasync `fd` (fsync where the platform has none), counted: enough for appended data,
    whose size is the only metadata a reader needs."""
    global _fsyncs
    sync = getattr(os, "fdatasync", None) or os.fsync
    sync(fd)
    with _fsync_lock:
        _fsyncs += 1


def _open_append(path: Path) -> int:
    """An fd appending to `path`, or -1 when the file does not exist yet."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        return -1


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
    if repair and (s.torn or s.bad_terminator is not None):
        cut_torn_tail(path)
    return [(off, orjson.loads(body)) for off, body in s.records]


def read_records(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """Every record of `path` (missing file: empty list); a torn tail is skipped."""
    return [rec for _, rec in read_records_with_offsets(path, repair)]


def read_line_at(path: Path, offset: int) -> bytes:
    """The bytes of `path` from `offset` to the end of that line, newline included (not verified:
    see `check_line`; without a newline when the file ends first, b"" at its end)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.readline()


def read_lines_at(path: Path, offsets: Sequence[int], seeks_max: int = 32) -> list[bytes]:
    """`read_line_at` for each of `offsets` (ascending) with one open: a seek each for fewer than
    `seeks_max`, else one read from the first offset on (a long history: one read, not a seek each)."""
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
        data = fh.read()
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


def cut_torn_tail(path: Path, good: int | None = None) -> bool:
    """Move an incomplete last line aside to `<file>.broken` and truncate, or put back the damaged
    newline of a last record that verifies; True if the file was changed.

    The explicit repair step (appenders before their first append, recovery, `doctor --repair`);
    raises `CorruptRecordError` when the file is damaged elsewhere. Each cut is logged at WARNING
    with the file, the offset and how many bytes were moved (never the bytes themselves).
    """
    if good is None:
        s = scan(path)
        if s.bad_terminator is not None:
            return _rewrite_terminator(path, s.bad_terminator)
        if not s.torn:
            return False
        good = s.good
    data = path.read_bytes()
    if good >= len(data):
        return False
    broken = broken_file(path)
    with open(broken, "ab") as fh:
        fh.write(data[good:])
        fh.flush()
        fsync_fd(fh.fileno())
    with open(path, "r+b") as fh:
        fh.truncate(good)
        fh.flush()
        fsync_fd(fh.fileno())
    log.warning("cut the torn tail of %s at byte %d: %d bytes moved to %s", path, good, len(data) - good, broken)
    return True


def _rewrite_terminator(path: Path, at: int) -> bool:
    """Put back the newline of the last record (byte `at` was damaged); logged. The old byte is
    appended to `<file>.broken`."""
    with open(path, "r+b") as fh:
        fh.seek(at)
        old = fh.read(1)
        if old == b"\n":
            return False
        with open(broken_file(path), "ab") as kept:
            kept.write(old)
            kept.flush()
            fsync_fd(kept.fileno())
        fh.seek(at)
        fh.write(b"\n")
        fh.flush()
        fsync_fd(fh.fileno())
    log.warning(
        "rewrote the damaged newline of the last record of %s at byte %d (old byte kept in %s)",
        path,
        at,
        broken_file(path),
    )
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
            datasync_fd(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


TIER_STATE = 0
"""Group tier of checkpoint data: durable at every step barrier and before an unsafe tool runs."""
TIER_EVENTS = 1
"""Group tier of the event log: durable at every step barrier (may lag the checkpoint until then)."""
TIER_LAZY = 2
"""Group tier of records that only a full barrier makes durable (tool journal ends, read-only intents)."""


class _FileSync:
    """Durability state of one file in this process: appends are numbered, fsyncs are shared.

    `written` counts appends whose `write` returned; `synced` is the highest count a finished
    fsync covered. An appender waits for `synced >= its number`; the first waiter fsyncs for every
    append written so far while the others wait for it (group commit across threads).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cond = threading.Condition()
        # 1 and 0: a file this process has not written yet still gets one fsync from `sync()`
        # (another process may have left unsynced appends that this one is about to act on).
        self.written = 1
        self.synced = 0
        self.busy = False

    def wrote(self) -> int:
        """Count one finished write; its number."""
        with self.cond:
            self.written += 1
            return self.written

    def wait(self, upto: int | None = None, kept: KeptFd | None = None) -> bool:
        """Return once every append up to number `upto` (all so far: None) is durable; True if this
        call issued the fsync. `kept` lends the appender's open descriptor for the fsync."""
        issued = False
        with self.cond:
            target = self.written if upto is None else upto
            while self.synced < target:
                if self.busy:
                    self.cond.wait()
                    continue
                self.busy = True
                covers = self.written
                self.cond.release()
                try:
                    _datasync_path(self.path, kept)
                    issued = True
                finally:
                    self.cond.acquire()
                    self.busy = False
                    self.cond.notify_all()
                self.synced = max(self.synced, covers)
        return issued


_file_syncs: weakref.WeakValueDictionary[str, _FileSync] = weakref.WeakValueDictionary()
_file_syncs_lock = threading.Lock()


def file_sync(path: Path) -> _FileSync:
    """The process-wide durability state of `path` (shared by every log object on that file)."""
    key = os.path.abspath(path)
    with _file_syncs_lock:
        st = _file_syncs.get(key)
        if st is None:
            st = _FileSync(Path(key))
            _file_syncs[key] = st
        return st


def _datasync_path(path: Path, kept: KeptFd | None = None) -> None:
    """fdatasync `path`, through the appender's kept descriptor when it is open."""
    fd = kept.borrow() if kept is not None else -1
    if fd >= 0:
        try:
            datasync_fd(fd)
        finally:
            kept.give_back()  # type: ignore[union-attr]
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # removed (a deleted session): nothing left to make durable
    try:
        datasync_fd(fd)
    finally:
        os.close(fd)


class KeptFd:
    """An append descriptor a log keeps open between appends (one open and close fewer per append
    and per fsync). An fsync borrows it; `close` while borrowed defers the close to the give-back,
    so a descriptor is never closed (and its number reused) under an fsync."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fd = -1
        self.ino = 0
        self._users = 0
        self._stale: list[int] = []

    def borrow(self) -> int:
        """The open descriptor (-1: none), held open until `give_back`."""
        with self._lock:
            if self.fd < 0:
                return -1
            self._users += 1
            return self.fd

    def give_back(self) -> None:
        """End a borrow; closes descriptors whose close was deferred."""
        with self._lock:
            self._users -= 1
            stale = self._stale if self._users == 0 else []
            self._stale = [] if self._users == 0 else self._stale
        for fd in stale:
            os.close(fd)

    def set(self, fd: int, ino: int) -> None:
        """Keep `fd` (of inode `ino`) open."""
        with self._lock:
            self.fd, self.ino = fd, ino

    def close(self) -> None:
        """Close the descriptor (later when an fsync borrows it)."""
        with self._lock:
            fd, self.fd, self.ino = self.fd, -1, 0
            if fd >= 0 and self._users:
                self._stale.append(fd)
                fd = -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        # A dropped log (its saver or session let go) does not leak its descriptor.
        if self.fd >= 0:
            os.close(self.fd)


@dataclass
class _Dirty:
    sync: _FileSync
    seq: int
    new: bool
    tier: int


class CommitGroup:
    """One durability barrier for appends to several logs (saver, event log, journal) of a session.

    While the group is held (`hold()` ... `release()`, or `with group.deferred():`), an
    `fsync="always"` append of a joined log only marks its file dirty, with a tier; `barrier(tier)`
    fsyncs each dirty file of that tier or lower once (oldest first, and each new file's folder),
    and the release of the outermost hold is a full barrier. Outside a hold, appends behave as their
    policy says. Thread-safe; holds nest.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._dirty: dict[Path, _Dirty] = {}

    @property
    def active(self) -> bool:
        """Whether the group is held (appends are deferred to its barriers)."""
        return self._depth > 0

    def note(self, path: Path, new: bool = False, tier: int = TIER_STATE, seq: int | None = None) -> None:
        """Mark `path` as appended to (append number `seq`; its folder too when the file is new)."""
        st = file_sync(path)
        with self._lock:
            old = self._dirty.get(st.path)
            n = seq if seq is not None else st.written
            if old is None:
                self._dirty[st.path] = _Dirty(st, n, new, tier)
            else:
                old.seq, old.new, old.tier = max(old.seq, n), old.new or new, min(old.tier, tier)

    def hold(self) -> None:
        """Start deferring the fsyncs of joined logs (until the matching `release`)."""
        with self._lock:
            self._depth += 1

    def release(self) -> int:
        """End one hold; the outermost one is a full barrier (returns the files it synced)."""
        with self._lock:
            self._depth -= 1
            last = self._depth <= 0
            self._depth = max(self._depth, 0)
        return self.barrier() if last else 0

    @contextmanager
    def deferred(self) -> Iterator[CommitGroup]:
        """Defer fsyncs of joined logs to one barrier at the end of the outermost block."""
        self.hold()
        try:
            yield self
        finally:
            self.release()

    def barrier(self, max_tier: int = TIER_LAZY) -> int:
        """fsync every dirty file of tier <= `max_tier` (oldest first); returns how many were synced."""
        with self._lock:
            due = [(p, d) for p, d in self._dirty.items() if d.tier <= max_tier]
            for p, _ in due:
                del self._dirty[p]
        done = 0
        try:
            for _, d in due:
                d.sync.wait(d.seq)
                if d.new:
                    fsync_dir(d.sync.path.parent)
                done += 1
        except BaseException:
            with self._lock:  # not durable: keep what is left dirty for the next barrier
                for p, d in due[done:]:
                    self._dirty.setdefault(p, d)
            raise
        return done

    def sync_file(self, path: Path) -> None:
        """Make `path` durable now (and drop it from the dirty set)."""
        st = file_sync(path)
        with self._lock:
            d = self._dirty.pop(st.path, None)
        st.wait()
        if d is not None and d.new:
            fsync_dir(st.path.parent)

    def dirty(self) -> list[Path]:
        """Files appended to since their last barrier (oldest first)."""
        with self._lock:
            return list(self._dirty)


Durable = Callable[[], None]

_groups: weakref.WeakValueDictionary[str, CommitGroup] = weakref.WeakValueDictionary()


def group_for(directory: Path) -> CommitGroup:
    """The process-wide commit group of `directory` (a session folder): every log of the session
    that joins it shares its holds and barriers (alive while a log or holder references it)."""
    key = os.path.abspath(directory)
    with _file_syncs_lock:
        g = _groups.get(key)
        if g is None:
            g = CommitGroup()
            _groups[key] = g
        return g


class RecordLog:
    """An append-only JSONL file of framed records.

    Appends use `O_APPEND` and one `write` call per batch, so concurrent appenders on one host
    never interleave bytes. Before its first append the log cuts a torn tail left by a crash
    (moved aside to `.broken`), or the next record would fuse with it. With `fsync="always"`
    the fsync runs after the write, outside the log's lock, and concurrent appenders of the
    same file share one (`_FileSync`).
    """

    def __init__(
        self,
        path: Path,
        fsync: FsyncPolicy = "always",
        group: CommitGroup | None = None,
        tier: int = TIER_STATE,
        keep_open: bool = False,
    ) -> None:
        self.path = path
        self.fsync = fsync
        self.group = group
        self.tier = tier
        self._lock = threading.Lock()
        self._checked = False
        self._sync = file_sync(path)
        # keep_open: the owner must call `close()` when the file may be replaced or removed
        # (`inode()` tells which file the descriptor writes to).
        self._kept = KeptFd() if keep_open else None

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
        """Append already framed lines in one write (durable per the policy); returns their offsets."""
        offsets, durable = self.write_frames(frames)
        if durable is not None:
            durable()
        return offsets

    def write_frames(self, frames: list[bytes], fsync: FsyncPolicy | None = None) -> tuple[list[int], Durable | None]:
        """Write framed lines in one write; returns their offsets and, when the policy (or `fsync`)
        asks for durability now, the callable that waits for it (call it outside your locks)."""
        policy = fsync or self.fsync
        kept = self._kept
        with self._lock:
            self._ensure_clean_tail()
            fd, new = (kept.fd, False) if kept is not None and kept.fd >= 0 else (_open_append(self.path), False)
            if fd < 0:
                new = True
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if kept is not None and kept.fd != fd:
                kept.set(fd, os.fstat(fd).st_ino)
            try:
                start = os.lseek(fd, 0, os.SEEK_END)
                blob = b"".join(frames)
                if write_hook is not None:
                    write_hook(fd, blob)
                os.write(fd, blob)
            finally:
                if kept is None:
                    os.close(fd)
            seq = self._sync.wrote()
        offsets, pos = [], start
        for f in frames:
            offsets.append(pos)
            pos += len(f)
        return offsets, self._durable(policy, seq, new)

    def _durable(self, policy: FsyncPolicy, seq: int, new: bool) -> Durable | None:
        if policy == "never":
            return None
        if self.group is not None and (policy == "batch" or self.group.active):
            self.group.note(self.path, new, self.tier, seq)
            return None
        if policy != "always":
            return None
        sync, parent, kept = self._sync, self.path.parent, self._kept

        def durable() -> None:
            sync.wait(seq, kept)
            if new:
                fsync_dir(parent)

        return durable

    def sync(self) -> None:
        """Make every append so far durable (no fsync when an earlier one already covered them)."""
        if self.group is not None:
            self.group.sync_file(self.path)
        else:
            self._sync.wait(None, self._kept)

    def inode(self) -> int:
        """The inode the kept descriptor writes to (0: none kept open)."""
        return self._kept.ino if self._kept is not None else 0

    def close(self) -> None:
        """Close the kept descriptor (a `keep_open` log reopens the file on its next append)."""
        if self._kept is not None:
            with self._lock:
                self._kept.close()

    def read(self) -> list[dict[str, Any]]:
        """Every record (a torn tail skipped, not cut)."""
        return read_records(self.path)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.read())


def fsync_policy_ok(value: str) -> FsyncPolicy:
    """Validate a saver's fsync policy name ("always", "checkpoint", "batch")."""
    if value not in ("always", "checkpoint", "batch"):
        raise ValueError(f"fsync must be 'always', 'checkpoint' or 'batch', got {value!r}")
    return value  # type: ignore[return-value]
