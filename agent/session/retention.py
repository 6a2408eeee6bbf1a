"""Reclaiming old sessions by age (`session.retention_days`): `agentrt store gc` and the workers.

A session is reclaimed when its expiry (last activity + `expire_minutes`) passed more than the
retention ago, or when it is ENDED and had no activity for the retention. Candidates come from
the session index (one query across tenants, `SessionIndex.reclaimable`; on the PostgreSQL record
store the SQL session table, `SqlSessionStore.reclaimable`), never from a walk of the folders;
each candidate's document is read again before it goes (the index is a cache and may be behind),
and a leased session (a run holds it) is skipped. Deletion is `removal.remove_session`,
the same as `agentrt erase`.

This is not the saver's `persistence.keep_last`, which trims old checkpoints inside a session that
is kept; retention removes whole sessions.

Workers (`maybe_collect`, after a task): at most every `session.gc_every_minutes`, by one worker of
the fleet at a time (`agent.session.periodic`): a `flock` on `base_dir/gc.lock`, or on the
PostgreSQL record store a document of the store (`gc`, outside every tenant).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from agent.core.errors import BackendUnavailable, DataCorrupt
from agent.core.statuses import SessionStatus
from agent.session import removal
from agent.session.periodic import run_claimed
from agent.session.removal import Removal
from agent.session.session import ChatSession
from checkpointing.session_index import IndexUnusable

if TYPE_CHECKING:
    from agent.session.runner_parts import RunnerParts

log = logging.getLogger("agentrt.sessions")
GC_LOCK_FILE = "gc.lock"
"""At the root of base_dir: the workers' reclaim lock; its modification time is the last run."""


def _due(doc: ChatSession, cutoff: datetime) -> bool:
    """Whether the document itself says the session is past the retention."""
    at = doc.expires_at()
    if at is not None and at < cutoff:
        return True
    return doc.status is SessionStatus.ENDED and doc.last_active_time < cutoff


def _document(runner: RunnerParts, tenant: str, sid: str) -> ChatSession | None:
    manager = runner.manager
    if manager.mode == "MIRROR" and manager.sql is not None:
        got = manager.sql.get(tenant, sid)
        if got is not None:
            return got
    return manager.jsonl.get(tenant, sid) or manager.jsonl.rebuild(tenant, sid)


def collect(runner: RunnerParts, dry_run: bool = False, now: datetime | None = None) -> Removal:
    """Delete (or, `dry_run`, list) the sessions past `session.retention_days`."""
    out = Removal(dry_run=dry_run)
    days = runner.settings.session.retention_days
    if days is None:
        out.notes.append("session.retention_days is not set: sessions are kept forever")
        return out
    cutoff = (now or datetime.now(UTC)) - timedelta(days=days)
    keys = _candidates(runner, cutoff)
    try:
        for tenant, sid in keys:
            _one(runner, tenant, sid, cutoff, out)
    finally:
        removal.finish(runner, out)  # also after a failure: the blobs of the sessions already gone
    return out


def _candidates(runner: RunnerParts, cutoff: datetime) -> list[tuple[str, str]]:
    """(tenant, session) of the index rows past the retention. On the PostgreSQL record store the
    session table is the index (the files store's index under base_dir is never written there)."""
    manager = runner.manager
    done = [SessionStatus.ENDED.value]
    if manager.jsonl.store is not None:
        if manager.sql is None:
            raise BackendUnavailable("store: postgres lists sessions from the SQL session table, and there is none")
        return manager.sql.reclaimable(cutoff, done)
    try:
        rows = manager.jsonl.index.reclaimable(cutoff, done)
    except IndexUnusable as err:
        raise DataCorrupt(f"{err}; rebuild it with `agentrt doctor --repair`, then run gc again") from err
    return [(row.tenant_id, row.session_id) for row in rows]


def _one(runner: RunnerParts, tenant: str, sid: str, cutoff: datetime, out: Removal) -> None:
    try:
        doc = _document(runner, tenant, sid)
    except (BackendUnavailable, ValueError) as err:
        out.skipped.append(removal.Skipped(tenant, sid, f"not read ({err})"))
        return
    if doc is None:
        if not out.dry_run:
            runner.manager.jsonl.forget(tenant, sid)  # a row without a session
        return
    if _due(doc, cutoff):  # else the row was behind: the session was used since
        removal.remove_session(runner, tenant, sid, out)


def maybe_collect(runner: RunnerParts) -> Removal | None:
    """Run `collect` if retention is set, it is due, and no other worker runs it; else None."""
    conf = runner.settings.session
    if conf.retention_days is None:
        return None
    return run_claimed(
        runner.settings, GC_LOCK_FILE, STORE_CLAIM, conf.gc_every_minutes * 60, lambda: _logged(collect(runner))
    )


STORE_CLAIM = ("@store", "@retention", "gc")
"""(tenant, thread, document) of the fleet's retention claim on the PostgreSQL store: outside the
id alphabet, so never a session's."""


def _logged(out: Removal) -> Removal:
    if out.sessions or out.skipped:
        log.info("session retention: %s", out.summary())
    return out
