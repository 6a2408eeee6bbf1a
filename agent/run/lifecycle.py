"""Pause, end and fork as session operations, each under the session lease."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.errors import ConfigError
from agent.session.session import ChatSession
from agent.turns import SessionHold

if TYPE_CHECKING:
    from agent.run.core import RunnerCore


def pause(rt: RunnerCore, session_id: str, tenant_id: str | None, user_id: str | None) -> ChatSession:
    """Mark the session PAUSED: plain turns are refused until `resume` (or end + fork)."""
    tenant, user, sid = rt._ids(session_id, tenant_id, user_id)
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:  # LeaseHeld while a run is going
        session = rt.manager.pause(tenant, sid, user)
        rt.manager.record(session, "run_pause", {"reason": "paused by the user"}, fencing_token=hold.token)
        return rt.manager.save(session)


def end(rt: RunnerCore, session_id: str, tenant_id: str | None, user_id: str | None) -> ChatSession:
    """Mark the session ENDED (no new turns; forking a branch reopens it)."""
    tenant, user, sid = rt._ids(session_id, tenant_id, user_id)
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:
        session = rt.manager.end(tenant, sid, user)
        rt.manager.record(session, "run_end", {"session_ended": True}, fencing_token=hold.token)
        return rt.manager.save(session)


def fork(
    rt: RunnerCore, session_id: str, from_entry_id: str, tenant_id: str | None, user_id: str | None
) -> dict[str, Any]:
    """Start a branch at an earlier entry; the next turn continues from that entry's checkpoint."""
    tenant, user, sid = rt._ids(session_id, tenant_id, user_id)
    with SessionHold(rt.settings, rt.lease, tenant, sid):  # not while a run is going
        session = rt.manager.get(tenant, sid, user)
        events = rt.manager.jsonl.event_log(tenant, sid)
        if not events.has(from_entry_id):
            raise ConfigError(f"entry {from_entry_id} is not in session {sid}; see `agentrt show {sid}` for entry ids")
        checkpoint_id = None
        for entry in events.path_to_root(from_entry_id, types=frozenset({"node_end"})):  # nearest first
            checkpoint_id = (entry.payload or {}).get("checkpoint_id")
            if checkpoint_id:
                break
        if checkpoint_id is None:
            raise ConfigError(
                f"entry {from_entry_id} comes before the session's first checkpoint, so there is no state to branch "
                "from: fork from a later entry, or start a new session"
            )
        branch_id = rt.manager.fork(session, from_entry_id, extra={"checkpoint_id": checkpoint_id})
        session.context = {**session.context, "fork_checkpoint_id": checkpoint_id}
        pin = getattr(rt.saver, "pin", None)
        if pin is not None:
            pin({"configurable": {"thread_id": sid, "tenant_id": tenant, "checkpoint_id": checkpoint_id}})
        rt.manager.save(session)
        return {
            "session_id": sid,
            "branch_id": branch_id,
            "from_entry_id": from_entry_id,
            "checkpoint_id": checkpoint_id,
            "status": session.status.value,
        }
