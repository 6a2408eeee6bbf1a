"""The `files` store: every session folder under `base_dir` (`FileStore`), and what is kept
beside the folders (the turn reservations, the outbox's due markers). One session's folder is
`checkpointing.store.files.FileSessionStreams`.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

from checkpointing.blobs import BlobStore
from checkpointing.commit_group import CommitGroup, group_for
from checkpointing.exceptions import CorruptRecordError
from checkpointing.layout import (
    OUTBOX_DUE,
    checkpoints_file,
    is_digest_folder,
    is_id,
    run_ids,
    runs_dir,
    sessions_root,
    tenant_ids,
    thread_dir,
    turn_file,
    turns_dir,
)
from checkpointing.records import FsyncPolicy, decode_file, encode_record, read_records
from checkpointing.store.base import OUTBOX
from checkpointing.store.files import FileSessionStreams


class FileStore:
    """Sessions as folders under `base_dir` (see the module docstring)."""

    def __init__(self, base_dir: str | Path, group: CommitGroup | None = None) -> None:
        self.base_dir = Path(base_dir)
        self.url = str(self.base_dir)
        self.group = group

    @cached_property
    def blobs(self) -> BlobStore:
        """The store's blobs: `base_dir/blobs/sha256/...` (`checkpointing.blobs.BlobStore`)."""
        return BlobStore(self.base_dir)

    def session(self, tenant: str, thread: str, fsync: FsyncPolicy) -> FileSessionStreams:
        """The session folder of (tenant, thread); its files join the folder's process-wide commit
        group unless a group was given (a runtime holding it defers their fsyncs to its barriers)."""
        directory = thread_dir(self.base_dir, tenant, thread)
        return FileSessionStreams(directory, tenant, thread, fsync, self.group or group_for(directory))

    def holding(self, tenant: str, run: str) -> list[str]:
        """The tenant's sessions whose stream `run` holds anything, by id: for OUTBOX one read of
        the due markers (`FileSessionStreams._due_marker`), for another stream a folder walk."""
        if run == OUTBOX:
            try:
                names = sorted(p.name for p in (sessions_root(self.base_dir, tenant).parent / OUTBOX_DUE).iterdir())
            except (FileNotFoundError, NotADirectoryError):
                return []
        else:
            try:
                names = sorted(p.name for p in sessions_root(self.base_dir, tenant).iterdir())
            except (FileNotFoundError, NotADirectoryError):
                return []
        return [n for n in names if is_id(n) and self.session(tenant, n, "batch").head(run)[0] > 0]

    def outbox_holders(self, tenant: str | None = None) -> list[tuple[str, str]]:
        """(tenant, session) of every session of `tenant` (None: of every tenant) whose OUTBOX
        holds anything, sorted: one folder read for the tenants, one per tenant for its markers."""
        tenants = [tenant] if tenant is not None else tenant_ids(self.base_dir)
        return [(t, sid) for t in sorted(tenants) for sid in self.holding(t, OUTBOX)]

    def threads(self, tenant: str | None = None, thread: str | None = None) -> list[tuple[str, str]]:
        """Sessions with a runs folder."""
        out: list[tuple[str, str]] = []
        for t in [tenant] if tenant else tenant_ids(self.base_dir):
            sessions = sessions_root(self.base_dir, t)
            if thread is not None:
                names = [thread]
            else:
                names = sorted(_thread_of(p) for p in sessions.iterdir()) if sessions.exists() else []
            out.extend((t, n) for n in names if runs_dir(thread_dir(self.base_dir, t, n)).exists())
        return out

    def doc_tenants(self, thread: str, name: str) -> list[str]:
        """The tenants whose session folder of `thread` holds document file `name` (one stat each)."""
        return [t for t in tenant_ids(self.base_dir) if (thread_dir(self.base_dir, t, thread) / name).is_file()]

    def reserve(self, tenant: str, key: str, value: dict[str, Any]) -> dict[str, Any] | None:
        """Create `tenants/<tenant>/turns/<key>.json` exclusively (`O_EXCL`), one framed record,
        fsynced: the file `agent.session.inbox.TurnIndex` always wrote."""
        path = turn_file(self.base_dir, tenant, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                return self.reserved(tenant, key) or {}
            except CorruptRecordError:
                return {}
        try:
            os.write(fd, encode_record(value))
            os.fsync(fd)
        finally:
            os.close(fd)
        return None

    def reserved(self, tenant: str, key: str) -> dict[str, Any] | None:
        """The reservation file's record; None when missing or empty (a crash cut it short)."""
        path = turn_file(self.base_dir, tenant, key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return decode_file(path, data) if data.strip(b"\x00") else None

    def unreserve(self, tenant: str, key: str | None = None) -> int:
        """Delete the reservation file of `key` (None: every one of the tenant); how many went."""
        paths = (
            [turn_file(self.base_dir, tenant, key)]
            if key is not None
            else list(turns_dir(self.base_dir, tenant).glob("*.json"))
        )
        gone = 0
        for path in paths:
            try:
                path.unlink()
                gone += 1
            except FileNotFoundError:
                pass
        return gone

    def close(self) -> None:
        """Nothing to release."""


def _thread_of(folder: Path) -> str:
    """The thread id a session folder belongs to (read from a record when the name is a digest,
    `layout.folder_name`)."""
    if not is_digest_folder(folder.name):
        return folder.name
    for run in run_ids(folder):
        for rec in read_records(checkpoints_file(folder, run)):
            if rec.get("k") == "c":
                return str(rec["session_id"])
    return folder.name
