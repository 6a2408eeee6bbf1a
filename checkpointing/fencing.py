"""Fencing tokens: refuse writes from a session owner whose lease was taken over.

A session lease grants a token that grows with every grant. Every writer of a session (saver,
event log, tool journal) calls `FencingGuard.check_and_raise(token)` before it writes: a token
lower than the highest one ever seen for the session raises `StaleFencingTokenError`, a higher
one becomes the new highest. The highest token lives in `<session dir>/fence.json` (one checksummed
record, `records.py`: a damaged file refuses writes with `CorruptRecordError` instead of reading a
wrong token; `checkpointing.verify` repairs it), updated under
an exclusive `flock` on `<session dir>/fence.lock`, so the rule holds across processes on one host.

Cheap on the hot path: the last value read is cached with the file's identity (inode, mtime,
size); a check with the cached token costs one `stat`, and the file is re-read only when another
process replaced it. `fenced(token)` (`hold` on the hot path) additionally holds a shared lock for
the duration of a write, so a new owner's first check waits for in-flight writes of the old one and
none can slip past it; its check is made under that lock, so a write costs one `stat`, not two.

A token of `None` means "no lease in use": the guard lets the write through.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from checkpointing.exceptions import CorruptRecordError, StaleFencingTokenError
from checkpointing.fsyncs import atomic_write
from checkpointing.layout import fence_file, fence_lock_file, session_dir
from checkpointing.records import decode_file, encode_record

_FileId = tuple[int, int, int]


class FencingGuard:
    """The highest lease token seen for one session directory, shared by every process of a host."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.fence_path = fence_file(self.directory)
        self.lock_path = fence_lock_file(self.directory)
        self._lock = threading.Lock()
        self._cached: int | None = None
        self._cached_id: _FileId | None = None

    @classmethod
    def for_session(cls, base_dir: Path | str, tenant: str, session_id: str) -> FencingGuard:
        """The guard of session `session_id` of `tenant` under `base_dir`."""
        return cls(session_dir(base_dir, tenant, session_id))

    def highest(self) -> int | None:
        """The highest token recorded on disk (None when no token was ever checked)."""
        with self._lock:
            value, _ = self._read()
            return value

    def check_and_raise(self, token: int | None) -> None:
        """Raise `StaleFencingTokenError` if `token` is lower than the highest seen; record it if higher."""
        if token is None:
            return
        with self._lock:
            cached = self._cached
            if cached is not None and token < cached:
                self._refuse(token, cached)
            if cached is not None and token == cached and self._file_id() == self._cached_id:
                return
            with self._flock(fcntl.LOCK_EX):
                self._advance(token)

    @contextmanager
    def fenced(self, token: int | None) -> Iterator[None]:
        """Check `token` and keep the session fenced for it while the body (one write) runs."""
        if token is None:
            yield
            return
        fd = self.hold(token)
        try:
            yield
        finally:
            os.close(fd)

    def hold(self, token: int) -> int:
        """`fenced` without a context manager (the hot path of every append): check `token`, take
        the shared lock, and return the descriptor whose closing (`os.close`) releases it.

        The check is `check_and_raise`'s, made under the shared lock: while the fence file is the
        one last read with `token` in it, one `stat` covers both; when it changed, a higher token
        refuses the write and a lower one (or none) is raised to `token` first, as
        `check_and_raise` does, before the lock is taken again."""
        while True:
            if self._cached != token:
                self.check_and_raise(token)
            fd = self._open_lock()
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                with self._lock:
                    if self._file_id() == self._cached_id:
                        return fd
                    value, file_id = self._read()
                    self._cached, self._cached_id = value, file_id
                    if value is not None and token < value:
                        self._refuse(token, value)
                    if value == token:
                        return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # behind `token` (replaced or removed): raised by `check_and_raise` above

    def _advance(self, token: int) -> None:
        """Under the exclusive lock: compare with the file and raise it to `token` if higher."""
        value, file_id = self._read()
        if value is not None and token < value:
            self._cached, self._cached_id = value, file_id
            self._refuse(token, value)
        if value is None or token > value:
            self.directory.mkdir(parents=True, exist_ok=True)
            doc = {"highest_token": token, "updated_at": datetime.now(UTC).isoformat()}
            atomic_write(self.fence_path, encode_record(doc))
            file_id = self._file_id()
        self._cached, self._cached_id = token, file_id

    def _read(self) -> tuple[int | None, _FileId | None]:
        """The token on disk and the identity of the file it was read from."""
        try:
            with open(self.fence_path, "rb") as fh:
                st = os.fstat(fh.fileno())
                raw = fh.read()
        except FileNotFoundError:
            return None, None
        try:  # written only by `atomic_write`, fsynced: an empty or zeroed file is damage too
            doc = decode_file(self.fence_path, raw)
            value = doc["highest_token"]
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError("highest_token is not an integer")
        except (CorruptRecordError, KeyError, TypeError) as err:
            # Refuse to write without a fence; `checkpointing.verify.repair_file` rebuilds it.
            why = err.reason if isinstance(err, CorruptRecordError) else str(err)
            raise CorruptRecordError(str(self.fence_path), 1, f"the fence is unreadable: {why}") from err
        return value, (st.st_ino, st.st_mtime_ns, st.st_size)

    def _file_id(self) -> _FileId | None:
        try:
            st = os.stat(self.fence_path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _open_lock(self) -> int:
        try:  # every fenced write comes here: the folder is made only when it is missing
            return os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            self.directory.mkdir(parents=True, exist_ok=True)
            return os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)

    @contextmanager
    def _flock(self, mode: int) -> Iterator[None]:
        fd = self._open_lock()
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)

    def _refuse(self, token: int, highest: int) -> None:
        raise StaleFencingTokenError(
            f"{self.directory}: write with lease token {token} refused, token {highest} was already "
            "granted to a newer owner. This process lost the session lease (paused or cut off past "
            "its TTL); stop writing and let the new owner continue."
        )
