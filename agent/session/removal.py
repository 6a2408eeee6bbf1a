"""Deleting sessions for good, on every layer the config has: what `agentrt erase` and
`agentrt store gc` share.

`remove_session` deletes one session: its SQL rows (`sessions`, `chat_messages`), its Redis keys
(the cached document, the Redis lease's token counter, the live-event streams of its turns), the
saver's records (the JSONL saver's live in the folder; another saver's are deleted by thread id),
on the PostgreSQL store every row of the session (its streams, documents and fence, whether or not
it ever ran), its folder under `base_dir/tenants/<t>/sessions/` (records, checkpoints, rooms), its
turn ids, and its row in the session index. It holds the session lease while it does so: a session a run
holds (or a live lease of a crashed run, until it lapses) is not touched and comes back as
skipped. The external layers go first and the folder last, so a removal cut short (a crash, a
database down) leaves the session findable and the same command finishes it when run again.

`Removal` adds up what went; `finish` then reclaims the blobs only the removed sessions used
(`blob_refs`: shared blobs stay while any remaining session references them).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.core.errors import DataCorrupt, LeaseHeld
from agent.session import blob_refs
from agent.session.lease_redis import RedisLease
from agent.session.record_store import inbox as record_inbox
from agent.session.record_store import session_streams
from agent.session.record_store import store as record_store
from checkpointing import layout
from checkpointing.blobs import BlobStore
from checkpointing.exceptions import CheckpointingError
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.store.pg_blobs import PostgresBlobStore
from checkpointing.store.postgres import PostgresSessionStreams

if TYPE_CHECKING:
    from agent.session.runner_parts import RunnerParts

log = logging.getLogger("agentrt.sessions")
ERASING_PREFIX = ".erasing-"
"""A session folder is renamed to this prefix + its id while its removal ends (not an id: no
listing or lookup sees it); a leftover is finished by the next removal in that tenant."""
_LEASE_ONLY = {
    layout.LEASE_LOCK_FILE,
    layout.LEASE_STATE_LOCK_FILE,
    layout.LEASE_STATE_FILE,
    layout.LEASE_TOKEN_FILE,
    layout.FENCE_FILE,
    layout.FENCE_LOCK_FILE,
}


@dataclass(frozen=True)
class Skipped:
    """A session left in place, and why."""

    tenant_id: str
    session_id: str
    reason: str


@dataclass
class Removal:
    """What a removal deleted (or, `dry_run`, would delete)."""

    dry_run: bool = False
    sessions: list[tuple[str, str]] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    sql_rows: int = 0
    redis_keys: int = 0
    blobs: int = 0
    blob_bytes: int = 0
    blobs_kept: int = 0
    crons: int = 0
    assistants: int = 0
    items: int = 0
    """Store items (LangGraph's store, the tenant's namespaces)."""
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    store_started: float | None = None
    """The PostgreSQL store's clock when the first session's rows were read (blob times are the
    server's: a machine's clock may differ)."""
    candidates: set[str] = field(default_factory=set)
    """Blob references of the removed sessions (reclaimed by `finish`)."""

    def to_json(self) -> dict[str, Any]:
        """The counts for `--json`."""
        return {
            "dry_run": self.dry_run,
            "sessions": len(self.sessions),
            "session_ids": [f"{t}/{s}" for t, s in self.sessions],
            "files": self.files,
            "bytes": self.bytes,
            "sql_rows": self.sql_rows,
            "redis_keys": self.redis_keys,
            "blobs": self.blobs,
            "blob_bytes": self.blob_bytes,
            "blobs_kept_shared": self.blobs_kept,
            "crons": self.crons,
            "assistants": self.assistants,
            "store_items": self.items,
            "skipped": [
                {"tenant_id": s.tenant_id, "session_id": s.session_id, "reason": s.reason} for s in self.skipped
            ],
            "notes": self.notes,
        }

    def _shared(self) -> list[tuple[int, str]]:
        return [(self.crons, "crons"), (self.assistants, "assistants"), (self.items, "store items")]

    def empty(self) -> bool:
        """Whether nothing was (or would be) deleted or skipped."""
        return not (self.sessions or self.skipped or any(n for n, _ in self._shared()))

    def summary(self) -> str:
        """One line of counts."""
        verb = "would delete" if self.dry_run else "deleted"
        return (
            f"{verb} {len(self.sessions)} sessions: {self.files} files ({self.bytes} bytes), "
            f"{self.sql_rows} SQL rows, {self.redis_keys} Redis keys, {self.blobs} blobs ({self.blob_bytes} bytes)"
            + "".join(f", {n} {what}" for n, what in self._shared() if n)
            + (f"; {self.blobs_kept} shared blobs kept (still referenced)" if self.blobs_kept else "")
            + (f"; {len(self.skipped)} skipped" if self.skipped else "")
        )


def count(folder: Path) -> tuple[int, int]:
    files = size = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                size += (Path(root) / name).lstat().st_size
                files += 1
            except OSError:
                continue
    return files, size


def _glob(text: str) -> str:
    """`text` with Redis glob characters escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def remove_session(runner: RunnerParts, tenant: str, sid: str, out: Removal, *, held_raises: bool = False) -> bool:
    """Delete one session everywhere (see the module doc); False when it was skipped (`out.skipped`).

    `held_raises`: a session a run holds raises `LeaseHeld` instead of being skipped.
    """
    from agent.session.hold import SessionHold

    folder = layout.session_dir(runner.settings.base_dir, tenant, sid)
    if out.dry_run:
        files, size = count(folder)
        out.files, out.bytes = out.files + files, out.bytes + size
        out.candidates |= _refs(runner, tenant, sid, folder, out)
        out.sessions.append((tenant, sid))
        return True
    try:
        hold = SessionHold(runner.settings, runner.lease, tenant, sid).__enter__()
    except LeaseHeld as err:
        if held_raises:
            raise
        why = f"a run holds it ({err.holder}); wait for the run to end or its lease to lapse, then run this again"
        out.skipped.append(Skipped(tenant, sid, why))
        return False
    aside = folder.with_name(ERASING_PREFIX + sid)
    try:
        files, size = count(folder)
        out.candidates |= _refs(runner, tenant, sid, folder, out)
        turns = _turn_ids(runner, tenant, sid)
        _external(runner, tenant, sid, out)
        _saver(runner, tenant, sid, out)
        streams = session_streams(runner.settings, tenant, sid)
        if isinstance(streams, PostgresSessionStreams):
            # The saver deletes only a thread that has run streams: a session that never ran (an API
            # thread made and not run) keeps its document and event log rows without this.
            streams.remove()
        if folder.exists():
            os.replace(folder, aside)
        runner.manager.jsonl.forget(tenant, sid)
        store = record_store(runner.settings)
        for turn in turns:
            store.unreserve(tenant, turn)
    finally:
        hold.__exit__(None, None, None)
    shutil.rmtree(aside, ignore_errors=True)
    _lease_leftovers(runner, tenant, sid, folder, out)
    out.files, out.bytes = out.files + files, out.bytes + size
    out.sessions.append((tenant, sid))
    return True


def _refs(runner: RunnerParts, tenant: str, sid: str, folder: Path, out: Removal) -> set[str]:
    """The blob references of the session's records: its folder's files, and on the PostgreSQL
    store its rows."""
    refs = blob_refs.folder_refs(folder)
    streams = session_streams(runner.settings, tenant, sid)
    if isinstance(streams, PostgresSessionStreams):
        if out.store_started is None:
            out.store_started = streams.store.clock()
        refs |= blob_refs.rows_refs(streams)
    return refs


def _turn_ids(runner: RunnerParts, tenant: str, sid: str) -> set[str]:
    try:
        return {
            str(r["turn_id"])
            for r in record_inbox(runner.settings, tenant, sid).records()
            if layout.is_id(str(r.get("turn_id")))
        }
    except (OSError, DataCorrupt, CheckpointingError, KeyError) as err:
        log.warning("session %s: its turn ids were not read (%s); their turn files stay", sid, err)
        return set()


def _external(runner: RunnerParts, tenant: str, sid: str, out: Removal) -> None:
    """SQL rows and Redis keys (errors propagate: the folder is then still there to retry from)."""
    manager = runner.manager
    manager.l1.delete(tenant, sid)
    if manager.sql is not None:
        out.sql_rows += manager.sql.erase(tenant, sid)
    l2 = manager.l2
    if l2 is not None:
        from agent.session.stores.redis import RedisSessionStore

        if isinstance(l2, RedisSessionStore):
            live = f"{_glob(runner.settings.workers.key_prefix)}live:*:{tenant}:{sid}:*"
            out.redis_keys += l2.erase([l2.key(tenant, sid)], [live])


def _saver(runner: RunnerParts, tenant: str, sid: str, out: Removal) -> None:
    saver = runner.saver
    if isinstance(saver, JsonlCheckpointSaver):
        saver.delete_thread(sid, tenant_id=tenant)  # its files are in the folder (counted there)
        return
    base = runner.settings.base_dir
    if any(layout.session_dir(base, t, sid).exists() for t in layout.tenant_ids(base) if t != tenant):
        note = (
            f"saver records of thread {sid} kept: another tenant has a session of that id (this saver has no tenants)"
        )
        if note not in out.notes:
            out.notes.append(note)
        return
    saver.delete_thread(sid)


def _lease_leftovers(runner: RunnerParts, tenant: str, sid: str, folder: Path, out: Removal) -> None:
    # Releasing a file lease re-makes its lock file in the folder; the Redis and PostgreSQL leases keep a
    # token counter (a key, a row).
    from agent.session.lease_postgres import PostgresLease

    if folder.is_dir() and {p.name for p in folder.iterdir()} <= _LEASE_ONLY:
        shutil.rmtree(folder, ignore_errors=True)
    lease = runner.lease
    if isinstance(lease, RedisLease):
        out.redis_keys += int(lease.client.delete(lease.lease_key(tenant, sid), lease.token_key(tenant, sid)))
    elif isinstance(lease, PostgresLease):
        out.sql_rows += lease.forget(tenant, sid)


def _is_session(p: Path) -> bool:
    return p.is_dir() and (layout.is_id(p.name) or layout.is_digest_folder(p.name))


def finish(runner: RunnerParts, out: Removal) -> None:
    """Reclaim the blobs only the removed sessions used (after every removal of one command)."""
    if runner.settings.persistence.saver == "sqlite":
        if out.candidates:
            out.notes.append("blobs kept: the sqlite saver's records are not scanned for blob references")
        return
    if not out.candidates:
        return
    store = runner.blobs
    removed = set(out.sessions) if out.dry_run else set()
    if isinstance(store, PostgresBlobStore):
        candidates = blob_refs.closure(store, out.candidates)
        started = out.store_started if out.store_started is not None else out.started
        got = blob_refs.reclaim_rows(store, candidates, removed, started, out.dry_run)
        out.blobs += len(got.deleted)
        out.blob_bytes += got.bytes
        existing = [c for c in candidates if store.exists(c)]
        out.blobs_kept += len(existing) - (len(got.deleted) if out.dry_run else 0)
        return
    if not isinstance(store, BlobStore):
        out.notes.append("blobs kept: this store's blobs are not reclaimed")
        return
    candidates = blob_refs.closure(store, out.candidates)
    got = blob_refs.reclaim(store, candidates, _remaining(runner, removed), out.started, out.dry_run)
    out.blobs += len(got.deleted)
    out.blob_bytes += got.bytes
    existing = [c for c in candidates if store.exists(c)]
    out.blobs_kept += len(existing) - (len(got.deleted) if out.dry_run else 0)


def _remaining(runner: RunnerParts, removed: set[tuple[str, str]]) -> list[Path]:
    """Every session folder of every tenant still there (in a dry run: but the ones it would remove)."""
    base = runner.settings.base_dir
    out: list[Path] = []
    for tenant in layout.tenant_ids(base):
        root = layout.sessions_root(base, tenant)
        try:
            out += [p for p in sorted(root.iterdir()) if _is_session(p) and (tenant, p.name) not in removed]
        except FileNotFoundError:
            continue
    return out
