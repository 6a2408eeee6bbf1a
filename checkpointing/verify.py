"""Verify and repair the files of a session folder: what `doctor` reads and `doctor --repair` does.

    reports = verify_session(folder)      # one FileReport per file, read-only
    done = repair_session(folder)         # one Repair per file changed (caller holds the session)

Three kinds of file live in a session folder (`checkpointing.layout`):

- record logs (`events.jsonl`, `journal.jsonl`, `outbox.jsonl`, `inbox.jsonl`,
  `runs/<run>/checkpoints.jsonl`): appended to, a framed record a line (`checkpointing.records`).
  Damage to the last record by a crash mid-append (any prefix of it, up to the whole record
  without its newline) is a torn tail: `TORN`, and reads already skip it. The repair cuts it,
  keeping the bytes in `<file>.broken`: every whole record stays. A last record that verifies but
  whose newline was damaged later is `TERMINATOR`: reads serve it, the repair puts the newline
  back. A complete line that does not verify is `CORRUPT` (the repair leaves it: restore the file
  from a backup).
- documents (`session.json`, `fence.json`, `pins.json`): one framed record, replaced whole by
  `fsyncs.atomic_write`, so a crash never tears them: any damage is `CORRUPT`. The repair moves a
  damaged `session.json` aside (its owner rebuilds it from its other copies and the event log) and
  rewrites a damaged `fence.json` above every fencing token the session's records carry (and the
  caller's `fence_floor`). A damaged `pins.json` (the checkpoints retention must keep) is moved
  aside too: the caller pins again, through the saver's `pin`, every checkpoint it knows must stay
  (its owner records why each one is pinned, e.g. a branch's fork point).
- indexes (`<log>.idx`): caches written without fsync. A damaged one is `STALE`: ignored by every
  reader and rewritten by the next append; the repair removes it.

Nothing here imports the runtime built on this package; the caller decides when to repair (under
its session lease, so a live writer's half-written append is never taken for a crash).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from checkpointing import fsyncs, indexfile, records
from checkpointing.exceptions import CorruptRecordError, OldFormatError
from checkpointing.layout import (
    EVENTS_FILE,
    FENCE_FILE,
    PINS_FILE,
    SESSION_FILE,
    SESSION_LOGS,
    broken_file,
    checkpoints_file,
    index_file,
    run_ids,
)
from checkpointing.torn_tail import cut_torn_tail

log = logging.getLogger(__name__)

__all__ = [
    "DOCUMENTS",
    "FileKind",
    "FileReport",
    "Health",
    "Repair",
    "record_logs",
    "repair_file",
    "repair_session",
    "verify_bytes",
    "verify_file",
    "verify_session",
]

DOCUMENTS = (SESSION_FILE, FENCE_FILE, PINS_FILE)
"""The one-record documents of a session folder this module verifies (each replaced whole)."""


class FileKind(StrEnum):
    """How a file is written, which decides what damage to it means."""

    LOG = "log"
    """Appended to, a record a line: a damaged last record is a torn tail."""
    DOCUMENT = "document"
    """One record, replaced whole (atomic rename): any damage is corruption."""
    INDEX = "index"
    """A persisted index beside a log: a cache, rebuilt when it does not verify."""


class Health(StrEnum):
    """What `verify_file` found."""

    OK = "ok"
    MISSING = "missing"
    TORN = "torn"
    """A log's last line is incomplete (a crash mid-append): reads skip it; `repair_file` cuts it."""
    TERMINATOR = "terminator"
    """A log's last record verifies but its newline was damaged: reads serve it; `repair_file`
    puts the newline back."""
    STALE = "stale"
    """An index that does not verify: readers ignore it; `repair_file` removes it."""
    BAD_TAIL = "bad_tail"
    """A stream of the PostgreSQL store whose rows, from one that does not verify to its end, all
    fail (its counterpart of a torn tail: an append there is one transaction, never torn). Reads
    refuse it; the store's `repair` cuts those rows, keeping them (`checkpointing.store.verify_ops`)."""
    CORRUPT = "corrupt"
    """A complete record that does not verify (or a damaged document)."""
    OLD_FORMAT = "old_format"
    """Written in an older on-disk format: refused, never rewritten."""

    @property
    def blocks(self) -> bool:
        """Whether readers refuse the file as it is (the session cannot go on until it is repaired)."""
        return self in (Health.CORRUPT, Health.OLD_FORMAT, Health.BAD_TAIL)


@dataclass(frozen=True)
class FileReport:
    """The verdict on one file of a session folder."""

    name: str
    """The path relative to the session folder (`runs/<run>/checkpoints.jsonl`)."""
    path: Path
    kind: FileKind
    health: Health
    records: int = 0
    """Whole records that verify (for a damaged log: those before the damage)."""
    good: int = 0
    """Where the last whole record ends: a torn tail starts here."""
    size: int = 0
    line: int | None = None
    """The line the damage is on (a log's torn or corrupt line; 1 for a document)."""
    reason: str = ""

    @property
    def repairable(self) -> bool:
        """Whether `repair_file` changes this file (a torn tail, a stale index, a damaged document)."""
        if self.health in (Health.TORN, Health.TERMINATOR, Health.STALE, Health.BAD_TAIL):
            return True
        return self.health is Health.CORRUPT and self.kind is FileKind.DOCUMENT

    def describe(self) -> str:
        """One line: `ok (N records)`, `torn tail at byte N (M bytes)`, `corrupt at line L: why`."""
        if self.health is Health.OK:
            return f"ok ({self.records} records)" if self.kind is FileKind.LOG else "ok"
        if self.health is Health.TORN:
            return (
                f"torn tail at byte {self.good} (line {self.line}, {self.size - self.good} bytes without "
                f"a newline: a crash mid-append; {self.records} whole records before it)"
            )
        if self.health is Health.TERMINATOR:
            return f"the newline of the last record (line {self.line}) is damaged; the record verifies and is read"
        if self.health is Health.BAD_TAIL:
            return (
                f"damaged last row(s) from line {self.line} (byte {self.good}: {self.reason}); no row after it "
                f"verifies; {self.records} rows before it verify"
            )
        if self.health is Health.STALE:
            return f"damaged index, ignored by readers ({self.reason})"
        if self.health is Health.MISSING:
            return "missing"
        return f"{self.health.value} at line {self.line}: {self.reason}"


@dataclass(frozen=True)
class Repair:
    """One change `repair_file` made."""

    path: Path
    action: str
    """What was done, in one line."""
    kept: Path | None = None
    """Where the bytes taken out were kept (`<file>.broken`), if any were."""


def record_logs(directory: Path) -> list[str]:
    """The session-relative names of the record logs of session folder `directory`: the session's
    logs (`layout.SESSION_LOGS`, missing ones included), then each run's checkpoint log."""
    runs = [checkpoints_file(directory, run).relative_to(directory).as_posix() for run in run_ids(directory)]
    return [*SESSION_LOGS, *runs]


def _kind(name: str) -> FileKind:
    if name.endswith(indexfile.SUFFIX):
        return FileKind.INDEX
    return FileKind.DOCUMENT if name in DOCUMENTS else FileKind.LOG


def verify_file(directory: Path, name: str, kind: FileKind | None = None) -> FileReport:
    """Verify the file `name` of session folder `directory` (read-only; never changes a byte)."""
    path = directory / name
    kind = kind or _kind(name)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return FileReport(name, path, kind, Health.MISSING)
    except OSError as err:
        return FileReport(name, path, kind, Health.CORRUPT, reason=f"unreadable: {err}")
    return verify_bytes(directory, name, data, kind)


def verify_bytes(directory: Path, name: str, data: bytes, kind: FileKind | None = None) -> FileReport:
    """`verify_file` on `data`, the bytes of file `name` of session folder `directory` (pure: reads
    nothing; for a caller that holds the bytes already, or a test trying every damage in memory)."""
    path = directory / name
    kind = kind or _kind(name)
    if kind is FileKind.LOG:
        return _verify_log(name, path, kind, data)
    try:
        records.decode_file(path, data)
    except CorruptRecordError as err:
        health = Health.STALE if kind is FileKind.INDEX else Health.CORRUPT
        return FileReport(name, path, kind, health, size=len(data), line=1, reason=err.reason)
    return FileReport(name, path, kind, Health.OK, records=1, good=len(data), size=len(data))


def _verify_log(name: str, path: Path, kind: FileKind, data: bytes) -> FileReport:
    try:
        found = records.scan_bytes(path, data)
    except (CorruptRecordError, OldFormatError) as err:
        before = records.scan_before(path, err.line)
        health = Health.OLD_FORMAT if isinstance(err, OldFormatError) else Health.CORRUPT
        return FileReport(name, path, kind, health, len(before.records), before.good, len(data), err.line, err.reason)
    n = len(found.records)
    if found.torn:
        why = "incomplete last record (a torn write)"
        return FileReport(name, path, kind, Health.TORN, n, found.good, found.size, n + 1, why)
    if found.bad_terminator is not None:
        why = f"damaged newline at byte {found.bad_terminator}"
        return FileReport(name, path, kind, Health.TERMINATOR, n, found.good, found.size, n, why)
    return FileReport(name, path, kind, Health.OK, n, found.good, found.size)


def verify_session(directory: Path) -> list[FileReport]:
    """Every record log, document and index of session folder `directory` that exists, verified."""
    names = [*record_logs(directory), *DOCUMENTS]
    names += [index_file(directory / n).relative_to(directory).as_posix() for n in record_logs(directory)]
    reports = [verify_file(directory, n) for n in names]
    return [r for r in reports if r.health is not Health.MISSING]


def repair_file(report: FileReport, fence_floor: int = 0) -> Repair | None:
    """Repair what `report` found, if it is repairable (see the module docstring); None otherwise.

    The caller must keep every writer of the session out while it runs (hold the session's lease).
    """
    path = report.path
    if report.health is Health.TORN:
        if not cut_torn_tail(path):
            return None
        kept = broken_file(path)
        return Repair(path, f"cut the torn tail of {report.name} at byte {report.good}", kept)
    if report.health is Health.TERMINATOR:
        if not cut_torn_tail(path):
            return None
        return Repair(path, f"put back the damaged newline of the last record of {report.name}", broken_file(path))
    if report.health is Health.STALE:
        path.unlink(missing_ok=True)
        return Repair(path, f"removed the damaged index {report.name} (rebuilt by the next append)")
    if not report.repairable or report.health is Health.BAD_TAIL:  # BAD_TAIL: rows, not a file
        return None
    kept = _move_aside(path)
    if report.name == FENCE_FILE:
        token = max(highest_fence_token(path.parent), fence_floor)
        doc = {"highest_token": token, "updated_at": datetime.now(UTC).isoformat()}
        fsyncs.atomic_write(path, records.encode_record(doc))
        return Repair(path, f"rewrote the damaged {report.name} with the highest fencing token found ({token})", kept)
    if report.name == PINS_FILE:
        return Repair(path, f"moved the damaged {report.name} aside (its checkpoints are pinned again)", kept)
    return Repair(path, f"moved the damaged {report.name} aside (rebuilt from the session's other copies)", kept)


def _move_aside(path: Path) -> Path:
    """Append the bytes of `path` to `<file>.broken`, then remove `path` (durably)."""
    kept = broken_file(path)
    data = path.read_bytes()
    with open(kept, "ab") as fh:
        fh.write(data)
        fh.flush()
        fsyncs.fsync_fd(fh.fileno())
    os.unlink(path)
    fsyncs.fsync_dir(path.parent)
    log.warning("moved the damaged %s aside to %s (%d bytes)", path, kept, len(data))
    return kept


def highest_fence_token(directory: Path) -> int:
    """The highest fencing token any intact entry of the session's event log carries (0: none).

    Every fenced writer of a session records its token in the fence before it writes, and the
    event log keeps the token of each entry, so this is a floor for a rebuilt `fence.json`.
    """
    highest = 0
    path = directory / EVENTS_FILE
    try:
        found = records.scan(path)
    except (CorruptRecordError, OldFormatError) as err:
        found = records.scan_before(path, err.line)  # the intact records before the damage
    for _, body in found.records:
        rec = records.loads(body)
        token = rec.get("fence")
        if isinstance(token, int) and not isinstance(token, bool):
            highest = max(highest, token)
    return highest


def repair_session(directory: Path, fence_floor: int = 0) -> list[Repair]:
    """Repair every repairable file of session folder `directory` (`verify_session`, then
    `repair_file`); returns what was done. Records that verify are never touched."""
    done = []
    for report in verify_session(directory):
        if report.repairable and (repair := repair_file(report, fence_floor)) is not None:
            done.append(repair)
    return done
