"""Errors raised by the checkpointing package.

CheckpointingError
 ├── CorruptRecordError      a bad record that is not a torn tail (file + line named)
 │    └── CorruptCheckpointError
 ├── BlobError
 │    ├── BlobMissingError   a referenced blob is not on disk
 │    └── BlobCorruptError   a blob's bytes do not match its digest
 ├── InvalidIdError          an id that would become a path is not allowed
 ├── UnsupportedValueError   a value the codec cannot write (fails at put, nothing written)
 ├── UnknownSchemaError      a document written by a newer/unknown schema version
 │    └── OldFormatError     a file in an older on-disk format (refused, never rewritten)
 ├── StaleFencingTokenError  a write carrying a lower lease token than one already seen
 ├── StoreUnavailableError   the store's database cannot be reached, the connection was lost, or
 │                           it lost commits it had not flushed (a crash)
 └── DocumentMismatch        a loaded document does not match what the caller expects
"""

from __future__ import annotations

from typing import Any


class CheckpointingError(Exception):
    """Root of every error this package raises."""


class CorruptRecordError(CheckpointingError):
    """A record in a JSONL file is damaged somewhere other than its torn last line."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(
            f"{path}:{line}: corrupt record ({reason}); the file was left untouched: repair it, or restore "
            "it from a backup."
        )


class CorruptCheckpointError(CorruptRecordError):
    """A checkpoint or writes file holds a damaged record."""


class BlobError(CheckpointingError):
    """A problem with the content-addressed blob store."""


class BlobMissingError(BlobError):
    """A record references a blob that is not on disk."""


class BlobCorruptError(BlobError):
    """A blob's bytes do not hash to the digest it is stored under."""


class InvalidIdError(CheckpointingError, ValueError):
    """An id that becomes part of a path failed validation."""


class UnsupportedValueError(CheckpointingError, TypeError):
    """The codec has no JSON form for a value."""


class UnknownSchemaError(CheckpointingError):
    """A document carries a schema version this code does not know how to read."""


class OldFormatError(UnknownSchemaError):
    """A file was written in an older on-disk record format this version no longer reads."""

    def __init__(self, path: str, line: int) -> None:
        self.path = path
        self.line = line
        self.reason = "on-disk format too old"
        super().__init__(
            f"{path}:{line}: written in an older on-disk format (records framed with a trailing _crc); "
            "this version reads format 2 only. Read the file with the version that wrote it; nothing was "
            "changed on disk."
        )


class StaleFencingTokenError(CheckpointingError):
    """A writer holding an expired lease tried to write after a newer holder."""


class StoreUnavailableError(CheckpointingError):
    """The store's database (PostgreSQL) could not be reached, a connection broke mid-call, or it
    lost commits it had acknowledged but not flushed yet (a crash restart: the event log finds
    itself shorter than what this process wrote)."""


class DocumentMismatch(CheckpointingError):
    """A loaded checkpoint does not match the expected graph version, digests or identity."""

    def __init__(self, step: str, reason: str, expected: Any, found: Any) -> None:
        self.step = step
        self.reason = reason
        self.expected = expected
        self.found = found
        super().__init__(f"{step}: {reason} (expected {expected!r}, found {found!r})")
