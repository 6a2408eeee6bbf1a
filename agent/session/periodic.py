"""One run a period, by one process of the fleet: the claim session retention and the converge
sweep share (`retention.maybe_collect`, `sweep.maybe_sweep`).

On the files store a non-blocking `flock` on a lock file at the root of base_dir picks the process,
and the file's modification time records the last run (an empty file: none yet), so the others
skip at the cost of one `stat`. On the PostgreSQL record store, where each machine has its own
base_dir, the fleet shares one claim instead: a document of the store holding when the last run
started, taken by compare-and-swap.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from agent.session.record_store import pg_store

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from checkpointing.store.postgres import PostgresStore

_T = TypeVar("_T")


def run_claimed(
    settings: AgentSettings, lock_file: str, store_claim: tuple[str, str, str], every: float, work: Callable[[], _T]
) -> _T | None:
    """`work()` when `every` seconds passed since its last run and this process claims the period;
    else None. `lock_file`: the claim's file at the root of base_dir; `store_claim`: (tenant, thread,
    document) of the claim on the PostgreSQL record store, outside the id alphabet."""
    store = pg_store(settings)
    if store is not None:
        return _store_claimed(store, store_claim, every, work)
    return _file_claimed(Path(settings.base_dir) / lock_file, every, work)


def _file_claimed(lock: Path, every: float, work: Callable[[], _T]) -> _T | None:
    try:
        st = lock.stat()
        if st.st_size and time.time() - st.st_mtime < every:
            return None
    except FileNotFoundError:
        pass
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # another process is at it
        st = os.fstat(fd)
        if st.st_size and time.time() - st.st_mtime < every:
            return None  # it finished while we looked
        if not st.st_size:
            os.write(fd, b"x")  # marks that a run happened (a fresh lock file has size 0)
        os.utime(fd)
        return work()
    finally:
        os.close(fd)


def _store_claimed(
    store: PostgresStore, claim: tuple[str, str, str], every: float, work: Callable[[], _T]
) -> _T | None:
    tenant, thread, name = claim
    streams = store.session(tenant, thread, "always")
    doc, version = streams.load_doc(name)
    now = store.clock()
    if doc is not None and now - float(doc.get("started", 0)) < every:
        return None
    if not streams.save_doc(name, {"started": now}, version):
        return None  # another process claimed it meanwhile
    return work()
