"""Recording RECOVERY_BLOCKED: an event on the session and the run status, never masking the block."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agent.core.errors import RecoveryBlocked
from agent.core.statuses import RunStatus
from agent.runner.chunks import jsonable
from agent.session.session import ChatSession

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner

log = logging.getLogger("agentrt.runner")


def record_blocked(rt: Runner, session: ChatSession, token: int | None, err: RecoveryBlocked) -> None:
    """Log a `recovery_blocked` entry and mark the run RECOVERY_BLOCKED (best effort: the caller re-raises)."""
    payload = {
        "step": err.step,
        "reason": err.reason,
        "expected": jsonable(err.expected),
        "found": jsonable(err.found),
    }
    try:
        _record_entry(rt, session, payload, token)
        rt.manager.mark_run(session, session.last_run_id or "", RunStatus.RECOVERY_BLOCKED)
    except Exception as exc:  # the block itself must still reach the caller
        log.warning("could not record RECOVERY_BLOCKED for %s: %s", session.session_id, exc)


def _record_entry(rt: Runner, session: ChatSession, payload: dict[str, Any], token: int | None) -> None:
    events = rt.manager.event_log(session.tenant_id, session.session_id)
    leaf = session.current_leaf_entry_id
    if leaf is None or events.has(leaf):
        rt.manager.memory.record(session, "recovery_blocked", payload, fencing_token=token)
        return
    # The session points at an entry the log no longer has (an event log restored from an
    # older backup): log the block at the end of the main branch, keep the session's pointers.
    anchor = session.model_copy()
    anchor.current_branch_id = "main"
    anchor.current_leaf_entry_id = events.branch_leaf("main")
    rt.manager.memory.record(anchor, "recovery_blocked", payload, fencing_token=token)
