"""Renewing a session whose first turn was rolled back: removed and made again, empty, same id,
owner and metadata, with its inbox carried over.

A first turn has no state before it to fork back to (`run_lifecycle.fork_before_run` answers
False), so undoing it means a session as it was before it ever ran. The workers' drainer does this
itself, under the session's drain lease and before it takes the session's next turn
(agent/runner/drain.py): the turns queued behind the rolled-back one (by any submitter) are kept in
the renewed session's inbox, in their order, and the next of them runs on the empty session, never
on the state of the run that was undone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.core.errors import SessionNotFound
from agent.runner.turns import SessionHold
from agent.session.record_store import inbox as record_inbox
from agent.session.record_store import turn_index
from agent.session.removal import Removal, finish, remove_session
from agent.session.session import THREAD_METADATA

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner


def renew_session(rt: Runner, tenant_id: str, session_id: str) -> bool:
    """Remove the session on every layer and make it again, empty, with the same id, user, agent and
    thread metadata; its inbox's records (and their turn ids) carried over. False: no such session.
    The caller holds the drain lease (no turn of the session starts meanwhile) and the run to undo
    has let go of the session lease; `LeaseHeld` when some other run holds it."""
    try:
        session = rt.manager.get(tenant_id, session_id)
    except SessionNotFound:
        return False
    metadata = session.context.get(THREAD_METADATA)
    # Sealed first: a turn submitted from now on is refused (submit again) rather than appended to
    # an inbox that is about to be removed.
    sealed = record_inbox(rt.settings, tenant_id, session_id)
    records = sealed.seal(rt.settings.persistence.lease_ttl_s)
    out = Removal()
    try:
        remove_session(rt, tenant_id, session_id, out, held_raises=True)
    except BaseException:
        sealed.unseal()  # not removed: the session goes on as it was, open to submitters again
        finish(rt, out)
        raise
    # The inbox first, at once: until the session is made again a submitter is refused (no
    # session), so no turn can be queued ahead of the ones carried over.
    record_inbox(rt.settings, tenant_id, session_id).carry(records)
    finish(rt, out)
    index = turn_index(rt.settings, tenant_id)
    for turn in dict.fromkeys(str(r["turn_id"]) for r in records if r.get("kind") == "submitted"):
        index.reserve(turn, session_id)
    context: dict[str, Any] = {THREAD_METADATA: metadata} if metadata else {}
    with SessionHold(rt.settings, rt.lease, tenant_id, session_id):  # made under its lease, as at first
        rt.manager.create(
            tenant_id,
            session.agent_id,
            session.user_id,
            session_id,
            config_digest=rt.pins.surface_digest,
            context=context,
        )
    return True
