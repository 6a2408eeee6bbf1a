"""The durable floor of a saver: the very bytes it appended, with the very syncs it issued, and
nothing else.

`trace(root)` records, while a saver runs, every `os.write` to a file under `root` and every
`os.fsync` / `os.fdatasync` of a file or folder under it, in order (the path of each fd from
/proc/self/fd). `replay(ops, root)` then does only that in a fresh folder: the same writes, each
appended to its file, and the same syncs at the same places, and returns the seconds it took. A
saver's ms/step against (the graph with no saver + the replay per step) is what the saver costs
beyond appending its records durably.

`ReplaySaver(ops, root)` does that replay inside a graph run: a LangGraph checkpointer that keeps
the latest checkpoint in memory and, at each `put` and `put_writes`, appends the traced saver's
next write(s) and does the sync(s) that followed them. It runs in the threads LangGraph runs the
saver in, so the graph with it is the floor of any saver making the same appends and syncs there.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

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


def _open_all(ops: list[Op], root: Path) -> tuple[dict[str, int], set[str]]:
    """Each path of `ops` under `root` opened once (a written file for appends, a folder to fsync)."""
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
    return fds, written


def _do(ops: list[Op], fds: dict[str, int], written: set[str]) -> None:
    datasync = getattr(os, "fdatasync", os.fsync)
    for kind, rel, data in ops:
        if kind == "w":
            os.write(fds[rel], data)
        elif rel in written:
            datasync(fds[rel])
        else:
            os.fsync(fds[rel])


def replay(ops: list[Op], root: Path) -> float:
    """Seconds to append `ops`' bytes to their files under `root` and sync where they synced.

    Folders are made and files opened before the clock starts (once each, kept open): the floor
    is the appends and the syncs alone. A synced folder is fsynced; a synced file fdatasynced.
    """
    fds, written = _open_all(ops, root)
    try:
        start = time.perf_counter()
        _do(ops, fds, written)
        return time.perf_counter() - start
    finally:
        for fd in fds.values():
            os.close(fd)


class ReplaySaver(BaseCheckpointSaver):  # type: ignore[type-arg]
    """The durable floor inside a graph run (see the module doc); `close()` when done."""

    def __init__(self, ops: list[Op], root: Path) -> None:
        super().__init__()
        self._fds, self._written = _open_all(ops, root)
        # One call's part: writes in a row, then the syncs that followed them.
        self._parts: list[list[Op]] = []
        for op in ops:
            if not self._parts or (op[0] == "w" and self._parts[-1][-1][0] == "s"):
                self._parts.append([])
            self._parts[-1].append(op)
        self._next = 0
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, str], CheckpointTuple] = {}

    def _one_part(self) -> None:
        # The writes in trace order under the lock (LangGraph calls put and put_writes from several
        # threads); the syncs after it, so concurrent calls share them as the saver's do.
        with self._lock:
            part = self._parts[self._next] if self._next < len(self._parts) else []
            self._next += 1
            _do([op for op in part if op[0] == "w"], self._fds, self._written)
        _do([op for op in part if op[0] != "w"], self._fds, self._written)

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        """The latest checkpoint put for the thread and namespace (kept in memory)."""
        conf = config["configurable"]
        return self._latest.get((str(conf["thread_id"]), conf.get("checkpoint_ns", "")))

    def list(self, config: Any, **kwargs: Any) -> Iterator[CheckpointTuple]:
        """The latest checkpoint only."""
        found = self.get_tuple(config) if config else None
        return iter([found] if found else [])

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """Keep the checkpoint; append and sync the next part of the trace."""
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "")
        out = {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}
        self._latest[(str(conf["thread_id"]), ns)] = CheckpointTuple(out, checkpoint, metadata, None, [])  # type: ignore[arg-type]
        self._one_part()
        return out

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        """Append and sync the next part of the trace (the writes are not kept)."""
        self._one_part()

    def close(self) -> None:
        """Close the files (parts not reached are left undone)."""
        for fd in self._fds.values():
            os.close(fd)


def summary(ops: list[Op]) -> tuple[int, int, int]:
    """(writes, bytes written, syncs) of a trace."""
    writes = [data for kind, _, data in ops if kind == "w"]
    return len(writes), sum(map(len, writes)), sum(1 for kind, _, _ in ops if kind == "s")


def floor_report(
    runs: dict[str, list[dict[str, Any]]],
    io_ms: list[float],
    steps: int,
    exponent: Callable[[dict[int, float], int], float | None],
) -> None:
    """Print "jsonl" against its durable floor: per round, the no-saver ms/step of that round plus
    the ms/step of replaying the saver's own writes and syncs (`replay`); then against "floor"
    (`ReplaySaver`: the same appends and syncs in the graph's run) and the saver's CPU; medians."""
    jsonl, none = runs.get("jsonl", []), runs.get("none", [])
    if not jsonl or len(none) != len(io_ms):
        return
    med = statistics.median
    floors = [n["ms"] + io for n, io in zip(none, io_ms, strict=True)]
    ratios = [j["ms"] / f for j, f in zip(jsonl, floors, strict=True)]
    print(
        f"durable floor at {steps} steps: no saver {med(n['ms'] for n in none):.2f} + the saver's "
        f"appends and syncs replayed {med(io_ms):.2f} = {med(floors):.2f} ms/step; "
        f"jsonl {med(r['ms'] for r in jsonl):.2f} ms/step = {med(ratios):.2f}x the floor "
        f"(per-round ratios {' '.join(f'{r:.2f}' for r in ratios)}; goal <= 1.15x)"
    )
    floor_exp = [e for r in none if (e := exponent(r["elapsed"], steps)) is not None]
    saver_exp = [e for r in jsonl if (e := exponent(r["elapsed"], steps)) is not None]
    if floor_exp and saver_exp:
        print(
            f"  time exponent (steps/4 -> steps): the floor's graph alone {med(floor_exp):.2f}, "
            f"jsonl {med(saver_exp):.2f} (above 1.0 the floor itself grows per step: plain "
            "add_messages merges the whole list at every step, and LangGraph hands a saver the whole list)"
        )
    own = [j["ms"] - n["ms"] for j, n in zip(jsonl, none, strict=True)]
    beyond = med(o / i for o, i in zip(own, io_ms, strict=True))
    print(
        f"  the saver's own cost {med(own):.2f} ms/step against its I/O alone {med(io_ms):.2f} ms/step: {beyond:.2f}x"
    )
    replayed = runs.get("floor", [])
    if len(replayed) == len(jsonl):
        in_graph = [j["ms"] / f["ms"] for j, f in zip(jsonl, replayed, strict=True)]
        vs_floor = med(f["ms"] / fl for f, fl in zip(replayed, floors, strict=True))
        print(
            f"  the same appends and syncs done at the saver's calls, in the graph's run (\"floor\"): "
            f"{med(r['ms'] for r in replayed):.2f} ms/step = {vs_floor:.2f}x the floor; "
            f"jsonl = {med(in_graph):.2f}x that (per-round {' '.join(f'{r:.2f}' for r in in_graph)})"
        )
    cpu = [r["cpu"] for r in jsonl if r.get("cpu")]
    if cpu:
        calls, check = med(c["calls"] for c in cpu), med(c["list check"] for c in cpu)
        print(f"  jsonl's CPU in its calls {calls:.2f} ms/step, of which its list check {check:.2f}")
