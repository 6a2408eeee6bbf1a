"""fsyncs, counted: of a file, of a folder, shared by the appenders of one file; atomic rewrites.

`fsync_count()` counts every fsync issued through here (bench). `file_sync(path)` is the
process-wide durability state of one file: appends are numbered, and concurrent waiters share one
fdatasync that covers every append written before it. `KeptFd` is an append descriptor a log keeps
open between appends (the saver's run files), lent to the fsync that covers them.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path

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


def fsync_count() -> int:
    """fsyncs issued through this module since the process started (for benchmarks)."""
    return _fsyncs


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fsync_fd(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Write `data` to `path` via temp file + fsync + rename + fsync of the folder."""
    atomic_write_frames(path, (data,), durable)


_WRITE_CHUNK = 256 * 1024
"""`atomic_write_frames` writes its pieces in writes of about this many bytes."""


def atomic_write_frames(path: Path, frames: Iterable[bytes], durable: bool = True) -> None:
    """`atomic_write` of the concatenation of `frames`, consumed one at a time (a rewrite of a long
    file never holds it whole). When `frames` raises, the temp file is removed and `path` is
    left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            pending: list[bytes] = []
            size = 0
            for piece in frames:
                pending.append(piece)
                size += len(piece)
                if size >= _WRITE_CHUNK:
                    _write_all(fd, b"".join(pending))
                    pending, size = [], 0
            if pending:
                _write_all(fd, b"".join(pending))
            if durable:
                datasync_fd(fd)
        finally:
            os.close(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
