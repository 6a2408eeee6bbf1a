"""Group commit: one durability barrier for the appends of a session's logs (saver, event log,
journal), owned by the store.

`group_for(directory)` is the process-wide group of a session folder; the files store
(`checkpointing.store.files`) joins every stream of the session to it, each at a tier, and
answers its clients' `SessionStreams.hold` / `release` / `commit` with the group's holds and
barriers. No client outside `checkpointing` holds a group or names a tier.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from checkpointing.fsyncs import _FileSync, file_sync, fsync_dir

TIER_STATE = 0
"""Group tier of checkpoint data: durable at every step barrier and before an unsafe tool runs."""
TIER_EVENTS = 1
"""Group tier of the event log: durable at every step barrier (may lag the checkpoint until then)."""
TIER_LAZY = 2
"""Group tier of records that only a full barrier makes durable (tool journal ends, read-only intents)."""


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


_groups_lock = threading.Lock()
_groups: weakref.WeakValueDictionary[str, CommitGroup] = weakref.WeakValueDictionary()


def group_for(directory: Path) -> CommitGroup:
    """The process-wide commit group of `directory` (a session folder): every log of the session
    that joins it shares its holds and barriers (alive while a log or holder references it)."""
    key = os.path.abspath(directory)
    with _groups_lock:
        g = _groups.get(key)
        if g is None:
            g = CommitGroup()
            _groups[key] = g
        return g
