"""Place checked session images into a base_dir: all or nothing, then register them.

Each session is written into a temp folder beside its final place (`.import-<id>-<random>`, not a
valid id, so no listing or walk sees it), fsynced, then renamed into place; the blobs go into the
blob store first (content-addressed: an existing one is kept). If anything fails, what this import
made (temp folders, renamed sessions, new blobs, new parent folders) is removed again. An id that
already exists in the target is refused before anything is written.

The fence (`fence.json`) is written at the highest token the session ever had, so the first lease
granted on this machine carries a token above every token the session's records carry. Then the
session is registered: its row in the index of sessions, and in SQL (the session row and its page
messages) when the persistence mode has SQL; a SQL that does not answer is owed the writes in the
session's outbox, replayed when it answers.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.core.errors import BackendUnavailable, InputError, SessionExists, quote_id
from agent.core.faults import crash_point
from agent.session.session import ChatSession
from agent.transfer.fileformat import ExportFile
from agent.transfer.guard import session_guard
from agent.transfer.image import CHECKPOINTS, DOCUMENTS, STREAMS, RoomEntry, SessionImage
from checkpointing.fsyncs import fsync_dir, fsync_fd
from checkpointing.layout import (
    blob_path,
    checkpoints_file,
    fence_file,
    room_dir,
    session_dir,
    sessions_root,
)
from checkpointing.records import decode_record, encode_record

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.session.manager import ChatSessionManager


def each_once(export: ExportFile) -> Iterator[tuple[SessionImage, tuple[str, str]]]:
    """Each session of the file with its (tenant, session) key; one that appears twice refuses the
    import (`InputError`, before anything is written)."""
    seen: set[tuple[str, str]] = set()
    for image in export.images:
        key = (image.tenant_id, image.session_id)
        if key in seen:
            sid = quote_id(image.session_id)
            raise InputError(f"session {sid} appears twice in the file; nothing was imported: export it once")
        seen.add(key)
        yield image, key


def sql_holds(manager: ChatSessionManager, key: tuple[str, str]) -> bool:
    """Whether the SQL session table has a row of (tenant, session) `key`; False without a table, or
    when it does not answer (the row is owed on registration)."""
    if manager.sql is None:
        return False
    try:
        return manager.sql.get(*key) is not None
    except BackendUnavailable:
        return False


def check_targets(settings: AgentSettings, manager: ChatSessionManager | None, export: ExportFile) -> None:
    """Refuse (nothing written) a session of the file that exists here already (its folder, or its
    SQL row: `manager` None when there is no store yet), saying so first when a run holds it."""
    for image, key in each_once(export):
        sid, tenant = quote_id(image.session_id), quote_id(image.tenant_id)
        taken = session_dir(settings.base_dir, *key).exists()
        if taken:
            with session_guard(settings, *key, "imported"):  # a running session: say so
                pass
        elif manager is not None:
            taken = sql_holds(manager, key)  # SQL down: the folder is the check
        if taken:
            raise SessionExists(
                f"session {sid} already exists for tenant {tenant} here; nothing was imported. "
                "Import into another base_dir (or keep the session that is here)"
            )


def place(base_dir: Path, export: ExportFile, fsync: bool = True) -> list[ChatSession]:
    """Write every session of `export` into `base_dir` (all or none); returns their documents."""
    undo: list[Any] = []
    try:
        _put_blobs(base_dir, export.blobs, undo, fsync)
        staged = [(image, _stage(base_dir, image, undo, fsync)) for image in export.images]
        placed = []
        for image, temp in staged:
            final = session_dir(base_dir, image.tenant_id, image.session_id)
            if final.exists():  # created since `check_targets`
                raise SessionExists(
                    f"session {quote_id(image.session_id)} was created here meanwhile; nothing was imported"
                )
            crash_point("mid_import")
            os.rename(temp, final)
            undo.append(("tree", final))
            if fsync:
                fsync_dir(final.parent)
            placed.append(ChatSession.from_json(decode_record(image.documents["session"])))
        return placed
    except BaseException:
        _undo(undo)
        raise


def _undo(undo: list[Any]) -> None:
    for kind, path in reversed(undo):
        try:
            if kind == "tree":
                shutil.rmtree(path, ignore_errors=True)
            elif kind == "file":
                path.unlink(missing_ok=True)
            elif kind == "dir":
                path.rmdir()
        except OSError:
            pass  # a folder someone else filled meanwhile stays


def _mkdirs(path: Path, undo: list[Any]) -> None:
    """Make `path` and its missing parents, noting each one made (removed again on failure)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        undo.append(("dir", d))


def _write(path: Path, data: bytes, mode: int = 0o644, fsync: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            fsync_fd(fd)
    finally:
        os.close(fd)


def _put_blobs(base_dir: Path, blobs: dict[str, bytes], undo: list[Any], fsync: bool) -> None:
    for hexdigest, data in sorted(blobs.items()):
        path = blob_path(base_dir, hexdigest)
        if path.exists():
            continue
        _mkdirs(path.parent, undo)
        temp = path.with_name(f".import-{uuid.uuid4().hex}")
        _write(temp, data, fsync=fsync)
        os.rename(temp, path)
        undo.append(("file", path))
        if fsync:
            fsync_dir(path.parent)


def _stage(base_dir: Path, image: SessionImage, undo: list[Any], fsync: bool) -> Path:
    """The session written whole into a temp folder beside its final place."""
    root = sessions_root(base_dir, image.tenant_id)
    _mkdirs(root, undo)
    temp = root / f".import-{image.session_id}-{uuid.uuid4().hex[:12]}"
    temp.mkdir()
    undo.append(("tree", temp))
    for name, line in image.documents.items():
        _write(temp / DOCUMENTS[name], line + b"\n", fsync=fsync)
    for (name, run), lines in image.streams.items():
        data = b"".join(line + b"\n" for line in lines)
        if name == CHECKPOINTS:
            assert run is not None
            path = checkpoints_file(temp, run)
            path.parent.mkdir(parents=True, exist_ok=True)
        else:
            path = temp / STREAMS[name]
        _write(path, data, fsync=fsync)
    if image.fence:
        doc = {"highest_token": image.fence, "updated_at": datetime.now(UTC).isoformat()}
        _write(fence_file(temp), encode_record(doc), fsync=fsync)
    for branch, entries in image.rooms.items():
        write_room(room_dir(temp, branch), entries, fsync)
    if fsync:
        for dirpath, _, _ in os.walk(temp):
            fsync_dir(Path(dirpath))
    return temp


def write_room(room: Path, entries: list[RoomEntry], fsync: bool) -> None:
    """Write a sandbox room's directories and files into `room` (made if missing)."""
    room.mkdir(parents=True, exist_ok=True)
    for e in entries:  # sorted by path: a folder comes before what is in it
        target = room.joinpath(*e.path.split("/"))
        if e.data is None:
            target.mkdir(mode=0o700, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write(target, e.data, 0o600, fsync=fsync)
        os.chmod(target, e.mode | 0o700 if e.data is None else e.mode, follow_symlinks=False)


def register(manager: ChatSessionManager, sessions: list[ChatSession]) -> list[str]:
    """Make placed sessions known: their index rows, and their SQL rows when the mode has SQL.
    Returns warnings (a SQL that did not answer is owed the writes through the outbox)."""
    from agent.session.outbox import Owed

    warnings = []
    for s in sessions:
        manager.jsonl.index_session(s)
        if manager.sql is None:
            continue
        try:
            manager.sql.put(s)
            manager.memory.sync_all_sql(s.tenant_id, s.session_id)
        except BackendUnavailable as err:
            manager.outbox.owe(s.tenant_id, s.session_id, "SQL", Owed.SESSION)
            manager.outbox.owe(s.tenant_id, s.session_id, "SQL", Owed.MESSAGES)
            warnings.append(
                f"session {quote_id(s.session_id)} was imported but SQL did not answer ({err}); "
                "it is written there once SQL answers"
            )
    return warnings
