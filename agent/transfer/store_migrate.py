"""`agentrt store migrate`: the sessions of a files base_dir moved into the PostgreSQL record store.

`agentrt store migrate --from files --to postgres` moves every session of a files base_dir the way
an import does (agent/transfer/store.py), one session at a time, each under both leases (the files
one of the source folder, the store's): one already in the store and identical is skipped, so a
migrate killed midway is finished by running it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent.core.errors import (
    DataCorrupt,
    LeaseHeld,
    SessionExists,
    SessionNotFound,
)
from agent.transfer.exporter import read_image
from agent.transfer.fileformat import ExportFile
from agent.transfer.guard import file_lease_lock, session_guard
from agent.transfer.image import CHECKPOINTS, SessionImage
from agent.transfer.importer import register
from agent.transfer.store import (
    IMPORTING,
    OUTBOX,
    _place_local,
    check_rooms,
    read_store_image,
    session_bytes,
    state,
    upload,
)
from checkpointing.layout import (
    is_id,
    session_dir,
    session_file,
    sessions_root,
    tenant_ids,
)

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.session.manager import ChatSessionManager
    from checkpointing.store.postgres import PostgresStore


# -- migrate -----------------------------------------------------------------------------------


@dataclass
class Moved:
    """What `migrate` did with one session of the files base_dir."""

    tenant_id: str
    session_id: str
    outcome: Literal["moved", "skipped", "not moved", "would move"]
    detail: str

    def to_json(self) -> dict[str, str]:
        """The JSON object of `agentrt store migrate --json`."""
        return {
            "tenant_id": self.tenant_id,
            "session_id": self.session_id,
            "outcome": self.outcome,
            "detail": self.detail,
        }


def continued(moved: SessionImage, there: SessionImage) -> bool:
    """Whether `there` (the store's) is `moved` run on since: every stream of `moved` is the start
    of the store's, its fence not above the store's (its documents may have changed since)."""
    return there.fence >= moved.fence and all(
        there.streams.get(key, [])[: len(lines)] == lines for key, lines in moved.streams.items() if key[0] != OUTBOX
    )


def source_sessions(from_dir: Path) -> Iterator[tuple[str, str]]:
    """(tenant, session) of every session folder under the files base_dir `from_dir`, sorted."""
    for tenant in tenant_ids(from_dir):
        root = sessions_root(from_dir, tenant)
        try:
            names = sorted(p.name for p in root.iterdir() if is_id(p.name) and p.is_dir() and not p.is_symlink())
        except FileNotFoundError:
            continue
        for name in names:
            yield tenant, name


def migrate(
    settings: AgentSettings,
    store: PostgresStore,
    manager: ChatSessionManager,
    from_dir: Path,
    dry_run: bool = False,
    report: Callable[[Moved], None] | None = None,
) -> list[Moved]:
    """Move every session of the files base_dir `from_dir` into the store, one at a time."""
    out = []
    for tenant, sid in source_sessions(from_dir):
        try:
            done = migrate_one(settings, store, manager, from_dir, tenant, sid, dry_run)
        except (LeaseHeld, DataCorrupt, SessionExists, SessionNotFound) as err:
            done = Moved(tenant, sid, "not moved", str(err))
        out.append(done)
        if report is not None:
            report(done)
    return out


def migrate_one(
    settings: AgentSettings,
    store: PostgresStore,
    manager: ChatSessionManager,
    from_dir: Path,
    tenant: str,
    sid: str,
    dry_run: bool,
) -> Moved:
    """Move one session (see `migrate`): under the source folder's file lease and the store's."""
    src = session_dir(from_dir, tenant, sid)
    if not session_file(src).exists():
        return Moved(tenant, sid, "skipped", "no session.json here (not a session of the files store)")
    with file_lease_lock(src, sid, "migrated"):
        image, blobs = read_image(from_dir, tenant, sid, None)
        with session_guard(settings, tenant, sid, "migrated"):
            found = state(store, tenant, sid)
            if found == "present":
                there, there_blobs = read_store_image(settings, store, tenant, sid, None)
                same = session_bytes(there, there_blobs) == session_bytes(image, blobs)
                if not same and continued(image, there):
                    return Moved(tenant, sid, "skipped", "already in the store, continued there since")
                if not same:
                    return Moved(
                        tenant,
                        sid,
                        "not moved",
                        f"the store holds another session {sid} (it changed there since, or is another "
                        f"session of that id); it is kept. Compare `agentrt export {sid}` of both",
                    )
                if not dry_run:  # this machine's rooms, if a run here has not made them yet
                    _place_local(settings.base_dir, image, [], settings.persistence.fsync == "always")
                return Moved(tenant, sid, "skipped", "already in the store, identical")
            check_rooms(settings.base_dir, image)
            files = sum(1 for entries in image.rooms.values() for e in entries if e.data is not None)
            what = (
                f"{len(image.streams[('events', None)])} events, "
                f"{sum(1 for name, _ in image.streams if name == CHECKPOINTS)} runs, {files} room files, "
                f"{len(image.blob_refs)} blobs"
            )
            if dry_run:
                return Moved(tenant, sid, "would move", what)
            export = ExportFile([image], blobs)
            placed = upload(settings, store, export, {(tenant, sid): found == "partial"})
            warnings = register(manager, placed)
            store.session(tenant, sid, "batch").delete_doc(IMPORTING)
            return Moved(tenant, sid, "moved", "; ".join([what, *warnings]))
