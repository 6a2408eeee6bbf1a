"""The documents and the fence of a session folder on the `files` store (`FileSessionStreams`).

A document (`session.json`, `pins.json`, a cron's) is one framed record in a file of the session
folder, rewritten whole (`fsyncs.atomic_write`); compare-and-swap runs under an exclusive `flock`
of the folder, the version being the file's identity (inode, mtime, size). The fence is the
folder's `fencing.FencingGuard` (`fence.json`), taken shared around each fenced append.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from checkpointing.exceptions import CorruptCheckpointError, CorruptRecordError
from checkpointing.fencing import FencingGuard
from checkpointing.fsyncs import atomic_write
from checkpointing.layout import is_id
from checkpointing.records import decode_file, encode_record


class FolderDocs:
    """The documents and the fence of the session folder `dir` (a part of `FileSessionStreams`)."""

    dir: Path
    _guard: FencingGuard | None

    @contextmanager
    def _fenced(self, token: int | None) -> Iterator[None]:
        if token is None:
            yield
            return
        if self._guard is None:
            self._guard = FencingGuard(self.dir)
        with self._guard.fenced(token):
            yield

    def highest_fence(self) -> int | None:
        """`FencingGuard.highest` of the session folder."""
        if self._guard is None:
            self._guard = FencingGuard(self.dir)
        return self._guard.highest()

    def advance_fence(self, token: int) -> None:
        """`FencingGuard.check_and_raise` of the session folder."""
        if self._guard is None:
            self._guard = FencingGuard(self.dir)
        self._guard.check_and_raise(token)

    def _doc_path(self, name: str) -> Path:
        if not is_id(name.removesuffix(".json")):
            raise ValueError(f"document name {name!r} is not an id")
        return self.dir / name

    def load_doc(self, name: str) -> tuple[dict[str, Any] | None, Any]:
        """The document file `name` (one framed record), verified; its version is the file's identity."""
        path = self._doc_path(name)
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                raw = fh.read()
        except FileNotFoundError:
            return None, None
        try:  # written only by `atomic_write`, fsynced: an empty or zeroed file is damage too
            return decode_file(path, raw), (st.st_ino, st.st_mtime_ns, st.st_size)
        except CorruptRecordError as err:
            raise CorruptCheckpointError(err.path, err.line, err.reason) from err

    def save_doc(self, name: str, doc: dict[str, Any], expect: Any) -> bool:
        """Rewrite document `name` under the folder's lock if it is still the version read."""
        path = self._doc_path(name)
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _file_id(path) != expect:
                return False
            atomic_write(path, encode_record(doc))
            return True
        finally:
            os.close(fd)

    def delete_doc(self, name: str) -> None:
        """Unlink document file `name`."""
        self._doc_path(name).unlink(missing_ok=True)


def _file_id(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)
