"""The repair step of the torn-tail rule (`checkpointing.records`): cut an incomplete last line.

An appender calls `cut_torn_tail` before its first append (or the next record would fuse with the
torn one), as do recovery and a repair (`checkpointing.verify.repair_file`). The
bytes cut are kept in `<file>.broken`; nothing else of the file changes.
"""

from __future__ import annotations

import logging
from pathlib import Path

from checkpointing.fsyncs import fsync_fd
from checkpointing.layout import broken_file
from checkpointing.records import scan

# The cuts are logged under the framing module's name, the one operators filter on.
log = logging.getLogger("checkpointing.records")


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
