"""The `files` store's session: a folder of JSONL files under `base_dir` (the default store;
`file_store.FileStore` is every folder, `file_docs.FolderDocs` a folder's documents and fence).

    base_dir/tenants/<tenant>/sessions/<thread>/runs/<run>/checkpoints.jsonl   a run stream
    base_dir/tenants/<tenant>/sessions/<thread>/events.jsonl                   session stream EVENTS
    base_dir/tenants/<tenant>/sessions/<thread>/pins.json                      a document
    base_dir/tenants/<tenant>/sessions/<thread>/fence.json                     the fence
    base_dir/tenants/<tenant>/turns/<turn>.json                                a reservation

(paths from `checkpointing.layout`). Appends are one `O_APPEND` write of framed lines
(`record_log.RecordLog`, fsync per policy, in the session's commit group, `commit_group`);
a stream's identity is its file's inode; a session stream (`base.SESSION_STREAMS`) is its file
in the session folder (`journal.jsonl` for JOURNAL, `inbox.jsonl`, `outbox.jsonl` for the reserved ones),
opened for each append as its owner always did (a run file's descriptor is kept open);
documents are rewritten whole (`fsyncs.atomic_write`) under an exclusive `flock` of the session
folder when compared-and-swapped; the fence is `fencing.FencingGuard`'s. This is the tree the
saver, the event log and the tool journal always wrote: nothing here changes a byte of it. Blobs are
`base_dir/blobs/sha256/...` (`store.blobs`, a `checkpointing.blobs.BlobStore`).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from checkpointing import indexfile
from checkpointing.commit_group import TIER_EVENTS, TIER_LAZY, TIER_STATE, CommitGroup
from checkpointing.fencing import FencingGuard
from checkpointing.fsyncs import atomic_write_frames
from checkpointing.layout import (
    OUTBOX_DUE,
    checkpoints_file,
    events_file,
    inbox_file,
    inbox_lock_file,
    is_id,
    journal_file,
    outbox_file,
    run_dir,
    runs_dir,
)
from checkpointing.record_log import Durable, RecordLog
from checkpointing.records import (
    FsyncPolicy,
    Scan,
    crc_at,
    read_line_at,
    read_lines_at,
    scan,
)
from checkpointing.store.base import EVENTS, INBOX, JOURNAL, OUTBOX, is_session_stream, served_file
from checkpointing.store.file_docs import FolderDocs
from checkpointing.verify import FileReport, Repair, repair_file, verify_session

_SEEKS_MAX = 32
"""Reading more lines than this from one file at once reads the span in one go."""
_SESSION_FILES: dict[str, Callable[[Path], Path]] = {
    EVENTS: events_file,
    JOURNAL: journal_file,
    INBOX: inbox_file,
    OUTBOX: outbox_file,
}
"""The file of each session stream in the session folder (`layout`)."""
_TIERS = {EVENTS: TIER_EVENTS, JOURNAL: TIER_LAZY}
"""The commit group tier of a stream's appends when not TIER_STATE (`commit_group.CommitGroup`): the
event log is durable at every step barrier; the tool journal's records only at a full barrier
(before an unsafe tool runs, the journal makes its intent durable itself, and at the run's end)."""


class FileSessionStreams(FolderDocs):
    """The files of one session folder (see the module docstring).

    `tiers`: the commit group tier of the appends to some streams, when not the default
    (`TIER_EVENTS` for EVENTS, `TIER_STATE` for every other); `fence`: the folder's guard when its
    owner already holds one (else one is made at the first fenced append).
    """

    persists_index = True

    def __init__(
        self,
        directory: Path,
        tenant: str,
        thread: str,
        fsync: FsyncPolicy,
        group: CommitGroup | None,
        tiers: Mapping[str, int] | None = None,
        fence: FencingGuard | None = None,
    ):
        self.dir = directory
        self.tenant = tenant
        self.thread = thread
        self.key = str(directory)
        self.label = runs_dir(directory)
        self.fsync = fsync
        self.group = group
        self.tiers = {**_TIERS, **(tiers or {})}
        self._logs: dict[str, RecordLog] = {}
        self._paths: dict[str, Path] = {}
        self._runs_sig: tuple[int, int, int] | None = None
        self._run_list: list[str] = []
        self._guard = fence

    def path(self, run: str) -> Path:
        """The run's checkpoints.jsonl, or the session stream's file."""
        path = self._paths.get(run)
        if path is None:  # built once: every saver call asks for it, and pathlib joins are slow
            served = served_file(run)
            if served is not None:
                path = self.dir / served
            elif is_session_stream(run):
                where = _SESSION_FILES.get(run)
                if where is None:
                    raise ValueError(f"unknown session stream {run!r}; use one of {sorted(_SESSION_FILES)}")
                path = where(self.dir)
            else:
                path = checkpoints_file(self.dir, run)
            self._paths[run] = path
        return path

    def _log(self, run: str) -> RecordLog:
        log = self._logs.get(run)
        if log is None:
            path, tier = self.path(run), self.tiers.get(run, TIER_STATE)
            # A session stream's file is opened for each append, as its owner always did.
            keep = not is_session_stream(run)
            log = self._logs[run] = RecordLog(path, fsync=self.fsync, group=self.group, tier=tier, keep_open=keep)
        return log

    def _run_names(self) -> list[str]:
        """The run folders, listed again only when the runs folder changed (mtime, link count)."""
        try:
            st = os.stat(self.label)
        except FileNotFoundError:
            self._runs_sig = None
            return []
        sig = (st.st_ino, st.st_mtime_ns, st.st_nlink)
        if sig != self._runs_sig:
            # A folder whose name is not a run id was not written by a saver (`layout.run_ids`).
            self._run_list = sorted(e.name for e in os.scandir(self.label) if e.is_dir() and is_id(e.name))
            self._runs_sig = sig
        return self._run_list

    def heads(self) -> dict[str, tuple[int, int]]:
        """Each run folder's file: (size, inode), (0, 0) when it has no file."""
        out: dict[str, tuple[int, int]] = {}
        for run in self._run_names():
            try:
                st = os.stat(self.path(run))
                size, ino = st.st_size, st.st_ino
            except FileNotFoundError:
                size, ino = 0, 0
            log = self._logs.get(run)
            if log is not None and log.inode() not in (0, ino):
                log.close()  # the file was replaced or removed: the next append opens the new one
            out[run] = (size, ino)
        return out

    def head(self, run: str) -> tuple[int, int]:
        """The stream's file: (size, inode), (0, 0) when it does not exist."""
        try:
            st = os.stat(self.path(run))
        except (FileNotFoundError, NotADirectoryError):  # a file where the folder should be: not there
            return 0, 0
        return st.st_size, st.st_ino

    def create(self, run: str, frames: list[bytes], policy: FsyncPolicy | None) -> bool:
        """Create the stream's file exclusively (`O_EXCL`) and append `frames`; an empty file
        (its creator died before writing) is taken over."""
        path = self.path(run)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            if path.stat().st_size > 0:
                return False
        _, _, wait = self.append(run, frames, policy, None)
        if wait is not None:
            wait()
        return True

    def scan(self, run: str, start: int = 0, first_line: int = 1, limit: int | None = None) -> Scan:
        """`records.scan` of the run's file (the torn-tail rule applies; `limit`: one window of it)."""
        return scan(self.path(run), start, first_line, limit)

    def read_at(self, run: str, offsets: list[int]) -> list[bytes]:
        """The lines at `offsets`: a seek each, or one read for many."""
        if len(offsets) == 1:
            return [read_line_at(self.path(run), offsets[0])]
        return read_lines_at(self.path(run), offsets, _SEEKS_MAX)

    def append(
        self, run: str, frames: list[bytes], policy: FsyncPolicy | None, token: int | None
    ) -> tuple[list[int], int, Durable | None]:
        """One write of `frames` to the stream's file, fenced by `token` (shared `flock`)."""
        log = self._log(run)
        if token is None:
            offs, wait = log.write_frames(frames, policy)
            return offs, log.inode(), wait
        if self._guard is None:
            self._guard = FencingGuard(self.dir)
        held = self._guard.hold(token)  # `_fenced` without its two context managers: every append comes here
        try:
            offs, wait = log.write_frames(frames, policy)
        finally:
            os.close(held)
        return offs, log.inode(), wait

    def _stream_lock(self, run: str) -> Path:
        """The lock file `append_if` and `replace_if` take on stream `run` (`inbox.lock` for INBOX,
        the lock the inbox always took)."""
        return inbox_lock_file(self.dir) if run == INBOX else self.path(run).with_name(self.path(run).name + ".lock")

    @contextmanager
    def _exclusive(self, run: str) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._stream_lock(run), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _due_marker(self) -> Path:
        """`tenants/<tenant>/outbox-due/<session>`: exists while the session's OUTBOX holds
        anything, so the sessions holding one are listed by one folder read (`FileStore.holding`)."""
        return self.dir.parent.parent / OUTBOX_DUE / self.dir.name

    def append_if(self, run: str, frames: list[bytes], expect_end: int) -> list[int] | None:
        """Under an exclusive `flock` of the stream's lock file: append if the file's size is still
        `expect_end`, fsynced (even while a run holds the session's commit group). The first
        append to OUTBOX makes its due marker first: a crash leaves a marker, never a debt unlisted."""
        with self._exclusive(run):
            if self.head(run)[0] != expect_end:
                return None
            if run == OUTBOX and expect_end == 0:
                marker = self._due_marker()
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            log = self._log(run)
            offs, wait = log.write_frames(frames, "always")
            if wait is not None:
                wait()
            else:  # a run holding the session's commit group deferred it: durable on return all the same
                log.sync()
            return offs

    def replace_if(self, run: str, frames: list[bytes], expect_end: int) -> bool:
        """`replace` under the stream's exclusive `flock`, only while its file's size is still
        `expect_end`; False, nothing changed, when it moved. OUTBOX replaced by nothing is
        truncated to empty (fsynced) and its due marker removed after."""
        with self._exclusive(run):
            if self.head(run)[0] != expect_end:
                return False
            if run == OUTBOX and not frames:
                path = self.path(run)
                with contextlib.suppress(FileNotFoundError):
                    fd = os.open(path, os.O_WRONLY)
                    try:
                        os.ftruncate(fd, 0)
                        if self.fsync != "never":
                            os.fsync(fd)
                    finally:
                        os.close(fd)
                self.close()
                self._due_marker().unlink(missing_ok=True)
                return True
            self.replace(run, frames)
            return True

    def replace(self, run: str, frames: Iterable[bytes]) -> None:
        """Atomic rewrite of the stream's file (its persisted index removed first), `frames` written
        as they come (a long run's rewrite never holds the file whole)."""
        self.close()
        indexfile.remove(self.path(run))
        pieces = iter(frames)
        first = next(pieces, None)
        if first is None:
            if is_session_stream(run):
                self.path(run).unlink(missing_ok=True)
            else:
                shutil.rmtree(run_dir(self.dir, run), ignore_errors=True)
            return
        atomic_write_frames(self.path(run), itertools.chain((first,), pieces))

    def remove(self) -> None:
        """Delete the session folder (and its outbox's due marker)."""
        self.close()
        self._due_marker().unlink(missing_ok=True)
        self._logs.clear()
        self._runs_sig = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def load_index(self, run: str) -> indexfile.Snapshot | None:
        """`indexfile.load` of the run's file."""
        return indexfile.load(self.path(run))

    def save_index(
        self, run: str, cover: tuple[int, int, int, str], state: dict[str, Any], probes: list[tuple[int, str]]
    ) -> None:
        """`indexfile.save` beside the run's file."""
        end, lines, last, crc = cover
        indexfile.save(self.path(run), end, lines, last, crc, state, probes)

    def crc_at(self, run: str, offset: int) -> str:
        """`records.crc_at` of the run's file."""
        return crc_at(self.path(run), offset)

    def sync(self, run: str | None = None) -> None:
        """fsync every file appended to (with `run`: that stream's file, `RecordLog.sync`)."""
        for log in [self._log(run)] if run is not None else list(self._logs.values()):
            log.sync()

    @property
    def held(self) -> bool:
        """Whether the session's commit group is held (its appends wait for a barrier)."""
        return self.group is not None and self.group.active

    def hold(self) -> None:
        """Hold the session's commit group (`CommitGroup.hold`)."""
        if self.group is not None:
            self.group.hold()

    def release(self) -> None:
        """End one hold of the session's commit group; the outermost is a full barrier."""
        if self.group is not None:
            self.group.release()

    def commit(self, run: str) -> None:
        """While held: the group's barrier of the checkpoint data (`TIER_STATE`), then `run`'s file;
        else only `run`'s file (`sync`)."""
        if self.group is not None and self.group.active:
            self.group.barrier(TIER_STATE)
        self.sync(run)

    def close(self) -> None:
        """Close the kept append descriptors (and list the run folders again next time)."""
        for log in self._logs.values():
            log.close()
        self._runs_sig = None

    def verify(self) -> list[FileReport]:
        """`checkpointing.verify.verify_session` of the session folder (none when it does not exist)."""
        return verify_session(self.dir) if self.dir.is_dir() else []

    def repair(self, report: FileReport, fence_floor: int = 0) -> Repair | None:
        """`checkpointing.verify.repair_file`; the kept append descriptors are closed first, so the
        next append reopens the file as the repair left it."""
        self.close()
        return repair_file(report, fence_floor)
