"""Read one session of the files store into a `SessionImage`, under its lease lock.

The session folder's record logs, documents and rooms are read whole; every record must verify
(a torn tail or a damaged line is refused: `agentrt doctor ID --repair` first). Blobs are those
the records name (`{"$blob": ...}` references, which must be present, and sandbox manifest digests),
and those the blobs name in turn. Not carried: caches (`<log>.idx`), lock files, the lease holder
record, bytes a repair moved aside (`*.broken`), symlinks and special files of a room, and a
room being made (`.making-*`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.core.errors import DataCorrupt, SessionNotFound, quote_id
from agent.session.lease_file import read_token_counter
from agent.session.session import ChatSession
from agent.transfer.image import CHECKPOINTS, DOCUMENTS, STREAMS, RoomEntry, SessionImage, blob_digests
from checkpointing.layout import (
    MAIN_BRANCH,
    MAKING_PREFIX,
    ROOMS,
    WORKSPACE,
    blob_path,
    checkpoints_file,
    fence_file,
    is_id,
    lease_files,
    run_ids,
    session_dir,
)
from checkpointing.records import decode_record, verify_line
from checkpointing.verify import highest_fence_token

TEMP_PREFIX = ".agentrt-tmp-"
"""A sandbox write's temp file a crash left behind (`agent.tools.sandbox.paths.TMP_PREFIX`)."""


BlobSource = Callable[[str], bytes | None]
"""Reads one blob by its hex digest: its bytes (not verified yet), None when there is no such blob."""


def not_found(session_id: str, tenant: str, user: str | None) -> SessionNotFound:
    """The error for a session the caller cannot export: the same words whether it is missing or
    another user's (or tenant's), so its existence is never told to someone it does not belong to."""
    sid, t = quote_id(session_id), quote_id(tenant)
    if user is None:
        return SessionNotFound(
            f"session {sid} not found for tenant {t}; check the id and --tenant (`agentrt sessions` lists them)"
        )
    return SessionNotFound(
        f"session {sid} not found for tenant {t} and user {quote_id(user)}; check the id, --tenant and --user "
        f"(`agentrt sessions --user {quote_id(user)}` lists yours)"
    )


def read_image(
    base_dir: Path,
    tenant: str,
    session_id: str,
    user: str | None,
    *,
    blobs: BlobSource | None = None,
    rooms_of: Path | None = None,
) -> tuple[SessionImage, dict[str, bytes]]:
    """The image of one session and the blobs it needs (hex -> bytes). The caller holds its lease.

    `blobs`: where the blobs are read (default: `base_dir`'s blob store); `rooms_of`: the session
    folder whose sandbox rooms are carried (default: the session's own folder). The PostgreSQL
    store passes both (`agent.transfer.store`): it reads a copy of the session's rows."""
    folder = session_dir(base_dir, tenant, session_id)
    documents = {name: _document(folder / file, session_id) for name, file in DOCUMENTS.items()}
    found = {k: v for k, v in documents.items() if v is not None}
    if "session" not in found:
        raise not_found(session_id, tenant, user)
    session = ChatSession.from_json(decode_record(found["session"]))
    if user is not None and session.user_id != user:
        raise not_found(session_id, tenant, user)
    streams: dict[tuple[str, str | None], list[bytes]] = {}
    for name, file in STREAMS.items():
        lines = _log(folder / file, session_id)
        if lines is not None:
            streams[(name, None)] = lines
    for run in run_ids(folder):
        streams[(CHECKPOINTS, run)] = _log(checkpoints_file(folder, run), session_id) or []
    if ("events", None) not in streams:
        sid = quote_id(session_id)
        raise DataCorrupt(f"session {sid} has no event log; check it with `agentrt doctor {sid}`")
    image = SessionImage(
        tenant_id=tenant,
        session_id=session_id,
        user_id=session.user_id,
        fence=_highest_token(folder),
        index=_index(base_dir, session),
        documents=found,
        streams=streams,
        rooms=_rooms(folder if rooms_of is None else rooms_of),
    )
    found_blobs = _blobs(blobs or _blob_files(base_dir), image)
    image.blob_refs = set(found_blobs)
    return image, found_blobs


def _document(path: Path, session_id: str) -> bytes | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    lines = _verified(path, data, session_id)
    if len(lines) != 1:
        raise _damaged(path, session_id, "not one record")
    return lines[0]


def _log(path: Path, session_id: str) -> list[bytes] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return _verified(path, data, session_id)


def _verified(path: Path, data: bytes, session_id: str) -> list[bytes]:
    if data and not data.endswith(b"\n"):
        raise _damaged(path, session_id, "its last record is torn")
    lines = data.split(b"\n")[:-1]
    for n, line in enumerate(lines, start=1):
        try:
            verify_line(line)
            line.decode("utf-8")
        except (ValueError, UnicodeDecodeError) as err:
            raise _damaged(path, session_id, f"line {n} does not verify: {err}") from None
    return lines


def _damaged(path: Path, session_id: str, why: str) -> DataCorrupt:
    sid = quote_id(session_id)
    return DataCorrupt(
        f"session {sid}: {path.name} is damaged ({why}); nothing was exported. "
        f"Run `agentrt doctor {sid} --repair` (or restore it from a backup), then export again"
    )


def _highest_token(folder: Path) -> int:
    """The highest fencing token the session ever had: its fence, its lease counter, its records."""
    highest = highest_fence_token(folder)
    try:
        doc = decode_record(fence_file(folder).read_bytes().rstrip(b"\n"))
        token = doc.get("highest_token")
        if isinstance(token, int) and not isinstance(token, bool):
            highest = max(highest, token)
    except FileNotFoundError:
        pass
    except ValueError as err:
        raise _damaged(fence_file(folder), folder.name, str(err)) from None
    try:
        highest = max(highest, read_token_counter(lease_files(folder).token))
    except DataCorrupt:
        pass  # a damaged counter is floored by the fence anyway
    return highest


def _index(base_dir: Path, session: ChatSession) -> dict[str, Any]:
    """The session's index attributes, made from its document and log (never the index cache)."""
    from agent.session.stores.jsonl import JsonlSessionStore
    from agent.session.stores.listing import index_row

    store = JsonlSessionStore(base_dir)
    row = index_row(session, store.event_log(session.tenant_id, session.session_id))

    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "user_id": row.user_id,
        "status": row.status,
        "created_at": iso(row.created_at),
        "last_activity": iso(row.last_activity),
        "expires_at": iso(row.expires_at),
        "version": row.version,
        "meta": dict(row.meta),
    }


def _rooms(folder: Path) -> dict[str, list[RoomEntry]]:
    rooms: dict[str, list[RoomEntry]] = {}
    if (folder / WORKSPACE).is_dir():
        rooms[MAIN_BRANCH] = room_entries(folder / WORKSPACE)
    forks = folder / ROOMS
    if forks.is_dir():
        for p in sorted(forks.iterdir()):
            if is_id(p.name) and p.name != MAIN_BRANCH and p.is_dir() and not p.is_symlink():
                rooms[p.name] = room_entries(p)
    return rooms


def room_entries(room: Path) -> list[RoomEntry]:
    """The directories and regular files of one sandbox room, sorted by path."""
    out: list[RoomEntry] = []
    for dirpath, dirnames, filenames in os.walk(room):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(MAKING_PREFIX))
        for name in sorted(dirnames + filenames):
            path = here / name
            st = path.lstat()
            rel = path.relative_to(room).as_posix()
            if stat.S_ISDIR(st.st_mode):
                out.append(RoomEntry(rel, stat.S_IMODE(st.st_mode) & 0o777))
            elif stat.S_ISREG(st.st_mode) and not name.startswith(TEMP_PREFIX):
                out.append(RoomEntry(rel, stat.S_IMODE(st.st_mode) & 0o777, path.read_bytes()))
    return sorted(out, key=lambda e: e.path)


def _blob_files(base_dir: Path) -> BlobSource:
    """Blobs read from `base_dir/blobs` (the files store)."""

    def read(hexdigest: str) -> bytes | None:
        try:
            return blob_path(base_dir, hexdigest).read_bytes()
        except FileNotFoundError:
            return None

    return read


def _blobs(read: BlobSource, image: SessionImage) -> dict[str, bytes]:
    hard: set[str] = set()
    soft: set[str] = set()
    for lines in [list(image.documents.values()), *image.streams.values()]:
        for line in lines:
            h, s = blob_digests(line)
            hard |= h
            soft |= s
    out: dict[str, bytes] = {}
    sid = quote_id(image.session_id)
    queue = sorted(soft | hard)
    seen = set(queue)
    while queue:
        hexdigest = queue.pop()
        data = read(hexdigest)
        if data is None:
            if hexdigest in hard:
                raise DataCorrupt(
                    f"session {sid} references blob sha256:{hexdigest}, which is missing; nothing was exported. "
                    f"See `agentrt doctor {sid}`"
                )
            continue  # a digest of something else (arguments, a text), not a blob
        if hashlib.sha256(data).hexdigest() != hexdigest:
            raise DataCorrupt(
                f"session {sid}: blob sha256:{hexdigest} does not match its digest; nothing was exported. "
                f"See `agentrt doctor {sid}`"
            )
        out[hexdigest] = data
        for inner in blob_digests(data)[1] - seen:
            seen.add(inner)
            queue.append(inner)
    return out
