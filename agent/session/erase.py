"""`agentrt erase`: every session of a tenant (or of one user in it), on every layer, for good.

The sessions are found on every layer that may hold one, so none is missed when a layer is
behind: the tenant's session folders (each folder's user from its document, its index row, or
its SQL row), and the tenant's SQL rows (a row whose folder is gone). A whole-tenant erase also
deletes what is left under the tenant's folder (turn ids) and the tenant's remaining SQL rows,
unless a session was skipped (leased): then that session and the tenant's folder stay.

Beyond the sessions (`erase_shared`): the tenant's crons (only `user`'s when given) go first, so
none starts a run meanwhile; a whole-tenant erase then deletes the tenant's assistants and store
items, which its users share (a one-user erase keeps them, and says so).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from agent.core.errors import BackendUnavailable
from agent.session import blob_refs, erase_shared, removal
from agent.session.record_store import pg_store
from agent.session.removal import Removal, Skipped
from checkpointing import layout
from checkpointing.session_index import IndexUnusable

if TYPE_CHECKING:
    from agent.session.runner_parts import RunnerParts

KEPT_NOTE = "the tenant's store items and assistants are kept: its users share them (erase without --user deletes them)"


def _user_of(runner: RunnerParts, tenant: str, sid: str) -> str | None:
    jsonl = runner.manager.jsonl
    try:
        row = jsonl.index.get(tenant, sid)
        if row is not None:
            return row.user_id
    except IndexUnusable:
        pass
    try:
        doc = jsonl.get(tenant, sid) or jsonl.rebuild(tenant, sid)
    except (BackendUnavailable, ValueError):
        return None
    return doc.user_id if doc is not None else None


def sessions_of(runner: RunnerParts, tenant: str, user: str | None, out: Removal) -> list[str]:
    """The tenant's session ids to erase (only `user`'s when given), sorted; a folder whose user
    cannot be told is skipped (named in `out.skipped`) when only one user's are erased."""
    base = runner.settings.base_dir
    found: set[str] = set()
    root = layout.sessions_root(base, tenant)
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and layout.is_id(p.name)) if root.is_dir() else []
    for sid in names:
        if user is None:
            found.add(sid)
            continue
        owner = _user_of(runner, tenant, sid)
        if owner == user:
            found.add(sid)
        elif owner is None:
            reason = "its user is unknown (no readable document): `agentrt doctor ID` tells why"
            out.skipped.append(Skipped(tenant, sid, reason))
    sql = runner.manager.sql
    if sql is not None:
        found |= set(sql.session_users(tenant, user))
    return sorted(found)


def erase(runner: RunnerParts, tenant: str, user: str | None, dry_run: bool) -> Removal:
    """Erase (or, `dry_run`, list) the sessions of `tenant` (only `user`'s when given)."""
    out = Removal(dry_run=dry_run)
    try:
        erase_shared.erase_crons(runner.settings, tenant, user, out)
        for sid in sessions_of(runner, tenant, user, out):
            removal.remove_session(runner, tenant, sid, out)
        if user is None:
            erase_shared.erase_items(runner.settings, tenant, out)
        else:
            out.notes.append(KEPT_NOTE)
        if not dry_run:
            _leftovers(runner, tenant, user, out)
    finally:
        removal.finish(runner, out)  # also after a failure: the blobs of the sessions already gone
    return out


def _leftovers(runner: RunnerParts, tenant: str, user: str | None, out: Removal) -> None:
    base = runner.settings.base_dir
    root = layout.sessions_root(base, tenant)
    for aside in root.glob(removal.ERASING_PREFIX + "*") if root.is_dir() else []:
        shutil.rmtree(aside, ignore_errors=True)  # a removal cut short after its rename
    if user is not None or out.skipped:
        return
    sql = runner.manager.sql
    if sql is not None:
        out.sql_rows += sql.erase_tenant_rest(tenant)
    store = pg_store(runner.settings)
    if store is not None:
        store.unreserve(tenant)  # turn ids of sessions gone before (their rows named no turn)
    folder = layout.tenant_dir(base, tenant)
    if folder.is_dir():
        files, size = removal.count(folder)
        out.files, out.bytes = out.files + files, out.bytes + size
        out.candidates |= blob_refs.folder_refs(folder)  # thread folders of non-id thread ids, if any
        shutil.rmtree(folder, ignore_errors=True)
