"""Export, import and migrate on the PostgreSQL record store (`persistence.store: postgres`).

A session's rows hold exactly the lines its files hold on the `files` store, so both directions go
through a session folder and reuse the files code:

- export: the session's rows are copied into a temporary folder laid out as the files store's
  session folder (`PostgresSessionStreams.dump()`, as `agentrt doctor` does) and the files
  exporter (`exporter.read_image`) reads that copy, the blobs it names read through `Store.blobs`.
  The same checks and the same image, so an export file does not depend on the store it was read
  from: files -> postgres -> files gives the identical file, byte for byte. The fence carried is the
  highest token the store's fence row or any record holds.
- import: the file is checked whole (`fileformat.read_export`), then each session's lines are
  uploaded as they are: its streams (`SessionStreams.create`), its documents (`create_doc`, the
  exact bytes), its fence (`advance_fence`: the first lease granted here is above every token the
  session ever had), its blobs (`Store.blobs.put`), then it is registered (the SQL session table,
  the index of sessions on this store).

Rooms: on PostgreSQL the sandbox rooms are this machine's (base_dir is a cache): a run finding its
room empty restores it from the checkpoint's manifest (blobs). So an export carries the rooms
found in this machine's base_dir, none on a machine that never ran the session (a resume there
refills the room from the manifest); an import puts every room file's bytes into the store's blobs
too, and writes the rooms into this machine's base_dir. A room already there with other content is
refused before anything is written. The outbox is a stream of the store like the event log.

All or nothing: the first row of an imported session is a marker document (`IMPORTING`), written
before its streams and deleted after it is registered; the session document (`session.json`, what
makes it a session) is its last row. If anything fails, what this import wrote is removed again
(`SessionStreams.remove()`, the blobs it added, the room folders it made). A session whose marker is
still there is what an import killed midway left: the next import or `agentrt store migrate` of it
removes it and starts over (under the session lease, so never while another import writes it).

`agentrt store migrate` (agent/transfer/store_migrate.py) moves sessions of a files base_dir
into the store this way.
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent.core.errors import (
    DataCorrupt,
    SessionExists,
    quote_id,
)
from agent.core.faults import crash_point
from agent.session.session import ChatSession
from agent.transfer.exporter import not_found, read_image, room_entries
from agent.transfer.fileformat import ExportFile, ExportWriter
from agent.transfer.guard import session_guard
from agent.transfer.image import CHECKPOINTS, DOCUMENTS, SessionImage
from agent.transfer.importer import _mkdirs, _undo, each_once, register, sql_holds, write_room
from checkpointing.blobs import blob_ref
from checkpointing.exceptions import BlobCorruptError, BlobMissingError, CheckpointingError
from checkpointing.fsyncs import fsync_dir
from checkpointing.layout import (
    room_dir,
    session_dir,
)
from checkpointing.records import decode_record, encode_record
from checkpointing.store.base import EVENTS, INBOX, JOURNAL
from checkpointing.store.base import OUTBOX as OUTBOX_STREAM

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.session.manager import ChatSessionManager
    from checkpointing.store.postgres import PostgresSessionStreams, PostgresStore

IMPORTING = "import.pending"
"""The marker document of a session being imported (deleted once it is registered)."""
_STREAMS = {"events": EVENTS, "journal": JOURNAL, "inbox": INBOX, "outbox": OUTBOX_STREAM}
"""The image's session streams, as rows of the store."""
OUTBOX = "outbox"

State = Literal["absent", "partial", "present"]


def state(store: PostgresStore, tenant: str, session_id: str) -> State:
    """Whether the store holds the session: `partial` is what an import cut short left."""
    streams = store.session(tenant, session_id, "batch")
    if streams.load_doc(IMPORTING)[0] is not None:
        return "partial"
    return "present" if streams.has_rows() else "absent"


# -- export ------------------------------------------------------------------------------------


def export_session(
    settings: AgentSettings, store: PostgresStore, tenant: str, session_id: str, user: str | None
) -> tuple[SessionImage, dict[str, bytes]]:
    """The image of one session of the store (and its blobs), read under its lease."""
    if state(store, tenant, session_id) != "present":
        raise not_found(session_id, tenant, user)
    with session_guard(settings, tenant, session_id, "exported"):
        return read_store_image(settings, store, tenant, session_id, user)


def read_store_image(
    settings: AgentSettings, store: PostgresStore, tenant: str, session_id: str, user: str | None
) -> tuple[SessionImage, dict[str, bytes]]:
    """The image of one session of the store: its rows copied into a session folder and read by
    the files exporter, rooms from this machine's base_dir. The caller holds its lease."""
    from agent.doctor.store_copy import copied_session

    local = session_dir(settings.base_dir, tenant, session_id)
    streams = store.session(tenant, session_id, "batch")
    with copied_session(store, tenant, session_id) as root:
        image, blobs = read_image(root, tenant, session_id, user, blobs=_blob_reader(store, session_id), rooms_of=local)
    image.fence = max(image.fence, streams.highest_fence() or 0)
    return image, blobs


def _blob_reader(store: PostgresStore, session_id: str) -> Callable[[str], bytes | None]:
    def read(hexdigest: str) -> bytes | None:
        try:
            return store.blobs.get(f"sha256:{hexdigest}")
        except BlobMissingError:
            return None
        except BlobCorruptError:
            sid = quote_id(session_id)
            raise DataCorrupt(
                f"session {sid}: blob sha256:{hexdigest} does not match its digest; nothing was exported. "
                f"See `agentrt doctor {sid}`"
            ) from None

    return read


def session_bytes(image: SessionImage, blobs: dict[str, bytes]) -> bytes:
    """One session as an export file carries it, its rooms left out (they are this machine's)."""
    buf = io.BytesIO()
    writer = ExportWriter(buf, 1)
    writer.session(replace(image, rooms={}), blobs)
    writer.close()
    return buf.getvalue()


# -- import ------------------------------------------------------------------------------------


def import_sessions(
    settings: AgentSettings, store: PostgresStore, manager: ChatSessionManager, export: ExportFile
) -> tuple[list[ChatSession], list[str]]:
    """Upload every session of `export` to the store (all or none) and register them; returns
    their documents and warnings. A session that exists here (rows, or a SQL row) is refused, and
    one a run holds is refused saying so, before anything is written."""
    with ExitStack() as guards:
        partial: dict[tuple[str, str], bool] = {}
        for image, key in each_once(export):
            sid, tenant = quote_id(image.session_id), quote_id(image.tenant_id)
            guards.enter_context(session_guard(settings, *key, "imported"))  # a running session: say so
            found = state(store, *key)
            taken = found == "present"
            if found == "absent":
                taken = sql_holds(manager, key)  # SQL down: the rows are the check
            if taken:
                raise SessionExists(
                    f"session {sid} already exists for tenant {tenant} in the store {store.name}; nothing was "
                    "imported. Import into another store (or keep the session that is here)"
                )
            check_rooms(settings.base_dir, image)
            partial[key] = found == "partial"
        placed = upload(settings, store, export, partial)
        warnings = register(manager, placed)
        for s in placed:
            store.session(s.tenant_id, s.session_id, "batch").delete_doc(IMPORTING)
    return placed, warnings


def check_rooms(base_dir: Path, image: SessionImage) -> None:
    """Refuse (nothing written) a room of the image that this machine holds with other content."""
    local = session_dir(base_dir, image.tenant_id, image.session_id)
    for branch, entries in image.rooms.items():
        room = room_dir(local, branch)
        if room.exists() and room_entries(room) != entries:
            raise SessionExists(
                f"this machine's base_dir holds another sandbox room of session {quote_id(image.session_id)} "
                f"({room}); nothing was imported. Move that folder away, then import again"
            )


@dataclass
class _Undo:
    """What an upload wrote, removed again (newest first) when it fails."""

    sessions: list[PostgresSessionStreams]
    blobs: list[str]
    local: list[Any]

    def run(self, store: PostgresStore) -> None:
        _undo(self.local)
        for streams in reversed(self.sessions):
            try:
                streams.remove()
            except (CheckpointingError, OSError):
                pass  # the store is down: the marker says what is left
        for ref in reversed(self.blobs):
            try:
                store.blobs.delete(ref)
            except (CheckpointingError, OSError):
                pass


def upload(
    settings: AgentSettings, store: PostgresStore, export: ExportFile, partial: dict[tuple[str, str], bool]
) -> list[ChatSession]:
    """Write every session of `export` to the store (all or none; `partial`: the sessions an import
    cut short left, removed first); returns their documents. The caller holds their leases."""
    undo = _Undo([], [], [])
    fsync = settings.persistence.fsync == "always"
    try:
        placed = []
        for image in export.images:
            streams = store.session(image.tenant_id, image.session_id, "always")
            if partial.get((image.tenant_id, image.session_id)):
                streams.remove()
            _upload_one(settings, store, streams, image, export.blobs, undo, fsync)
            placed.append(ChatSession.from_json(decode_record(image.documents["session"])))
        return placed
    except BaseException:
        undo.run(store)
        raise


def _meanwhile(image: SessionImage) -> SessionExists:
    return SessionExists(f"session {quote_id(image.session_id)} was created here meanwhile; nothing was imported")


def _upload_one(
    settings: AgentSettings,
    store: PostgresStore,
    streams: PostgresSessionStreams,
    image: SessionImage,
    blobs: dict[str, bytes],
    undo: _Undo,
    fsync: bool,
) -> None:
    marker = encode_record({"kind": "import", "at": datetime.now(UTC).isoformat(), "pid": os.getpid()})
    if not streams.create_doc(IMPORTING, marker):
        raise _meanwhile(image)
    undo.sessions.append(streams)
    wanted = {f"sha256:{h}": blobs[h] for h in image.blob_refs}
    for entries in image.rooms.values():  # room files are blobs too: a room restores from them
        wanted.update((blob_ref(e.data), e.data) for e in entries if e.data is not None)
    for ref, data in sorted(wanted.items()):
        if not store.blobs.exists(ref):
            store.blobs.put(data)
            undo.blobs.append(ref)
    # The event log last of the streams: a store lists the sessions that have one.
    order = sorted(image.streams.items(), key=lambda kv: (kv[0][0] == "events", kv[0][0], kv[0][1] or ""))
    for (name, run), lines in order:
        stream = run if name == CHECKPOINTS else _STREAMS[name]
        assert stream is not None
        if not streams.create(stream, [line + b"\n" for line in lines], "always"):
            raise _meanwhile(image)
    if image.fence > (streams.highest_fence() or 0):
        streams.advance_fence(image.fence)
    crash_point("mid_import")
    _place_local(settings.base_dir, image, undo.local, fsync)
    for name in sorted(image.documents, key=lambda n: n == "session"):  # session.json last
        if not streams.create_doc(DOCUMENTS[name], image.documents[name] + b"\n"):
            raise _meanwhile(image)


def _place_local(base_dir: Path, image: SessionImage, undo: list[Any], fsync: bool) -> None:
    """This machine's part of the session: its rooms, each renamed into place whole (one already
    here is kept: `check_rooms` made sure it is the same)."""
    folder = session_dir(base_dir, image.tenant_id, image.session_id)
    for branch, entries in sorted(image.rooms.items()):
        room = room_dir(folder, branch)
        if room.exists():
            continue
        _mkdirs(room.parent, undo)
        temp = room.parent / f".import-{uuid.uuid4().hex[:12]}"
        undo.append(("tree", temp))
        write_room(temp, entries, fsync)
        os.rename(temp, room)
        undo.append(("tree", room))
        if fsync:
            fsync_dir(room.parent)
