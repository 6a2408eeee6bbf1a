"""The durable floor of a saver: the very bytes it appended, with the very syncs it issued, and
nothing else.

`trace(root)` records, while a saver runs, every `os.write` to a file under `root` and every
`os.fsync` / `os.fdatasync` of a file or folder under it, in order (the path of each fd from
/proc/self/fd). `replay(ops, root)` then does only that in a fresh folder: the same writes, each
appended to its file, and the same syncs at the same places, and returns the seconds it took. A
saver's ms/step against (the graph with no saver + the replay per step) is what the saver costs
beyond appending its records durably.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

Op = tuple[str, str, bytes]  # ("w", relative path, bytes) or ("s", relative path, b"")


@contextlib.contextmanager
def trace(root: Path) -> Iterator[list[Op]]:
    """Record the writes and syncs under `root` while the block runs (see the module doc)."""
    ops: list[Op] = []
    base = str(root.resolve()) + os.sep
    real = {name: getattr(os, name) for name in ("write", "fsync", "fdatasync")}

    def where(fd: int) -> str | None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        return path[len(base) :] if path.startswith(base) else ("." if path + os.sep == base else None)

    def write(fd: int, data: bytes) -> int:
        rel = where(fd)
        if rel is not None:
            ops.append(("w", rel, bytes(data)))
        return real["write"](fd, data)

    def syncer(name: str):  # type: ignore[no-untyped-def]
        def sync(fd: int) -> None:
            rel = where(fd)
            if rel is not None:
                ops.append(("s", rel, b""))
            real[name](fd)

        return sync

    os.write = write  # type: ignore[assignment]
    os.fsync = syncer("fsync")  # type: ignore[assignment]
    os.fdatasync = syncer("fdatasync")  # type: ignore[assignment]
    try:
        yield ops
    finally:
        for name, fn in real.items():
            setattr(os, name, fn)


def replay(ops: list[Op], root: Path) -> float:
    """Seconds to append `ops`' bytes to their files under `root` and sync where they synced.

    Folders are made and files opened before the clock starts (once each, kept open): the floor
    is the appends and the syncs alone. A synced folder is fsynced; a synced file fdatasynced.
    """
    fds: dict[str, int] = {}
    written = {rel for kind, rel, _ in ops if kind == "w"}
    for rel in sorted({rel for _, rel, _ in ops}):
        path = root / rel
        if rel in written:
            path.parent.mkdir(parents=True, exist_ok=True)
            fds[rel] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        else:
            path.mkdir(parents=True, exist_ok=True)
            fds[rel] = os.open(path, os.O_RDONLY)
    datasync = getattr(os, "fdatasync", os.fsync)
    try:
        start = time.perf_counter()
        for kind, rel, data in ops:
            if kind == "w":
                os.write(fds[rel], data)
            elif rel in written:
                datasync(fds[rel])
            else:
                os.fsync(fds[rel])
        return time.perf_counter() - start
    finally:
        for fd in fds.values():
            os.close(fd)


def summary(ops: list[Op]) -> tuple[int, int, int]:
    """(writes, bytes written, syncs) of a trace."""
    writes = [data for kind, _, data in ops if kind == "w"]
    return len(writes), sum(map(len, writes)), sum(1 for kind, _, _ in ops if kind == "s")
