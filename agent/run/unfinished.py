"""What a stopped run left behind: a pending graph step, or a turn killed before its first checkpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.errors import SessionError
from agent.events import of_run
from agent.run.branches import head
from agent.run.reading import light_snapshot
from agent.session.lifecycle import RunStatus
from agent.session.session import ChatSession
from agent.tools.journal import JournalStatus

if TYPE_CHECKING:
    from agent.run.core import RunnerCore

CLOSING = frozenset({"run_end", "run_fail", "run_pause"})
USER_TURN = frozenset({"user_turn"})


def refuse_unfinished(rt: RunnerCore, session: ChatSession) -> None:
    """Raise `SessionError` when the session's last run has not finished (it must be resumed first)."""
    sid = session.session_id
    # The branch being run, not the thread's newest checkpoint: a run left unfinished on the
    # branch a fork came from stays there, and a branch not run yet starts from its fork point.
    at = head(rt, session)
    thread = at.config(session.tenant_id, sid)
    nodes: list[str] = []
    if at.own:
        snap = light_snapshot(rt, thread)
        nodes = list(snap.next) or [t.name for t in snap.tasks]
    if not nodes:
        doc = rt._checkpoint_doc(thread) if at.own else None
        events = rt.manager.jsonl.event_log(session.tenant_id, sid)
        if turn_without_checkpoint(rt, session, events, str((doc or {}).get("run_id") or "")) is not None:
            nodes = ["init"]  # a turn was recorded, then killed before its first checkpoint
    if nodes:
        raise SessionError(
            f"session {sid} has an unfinished run ({session.last_run_status}, next: {', '.join(nodes)}); "
            f"continue it with `agentrt resume {sid}` before starting a new turn"
        )


def run_closed(rt: RunnerCore, session: ChatSession) -> bool:
    """Whether the session's last run wrote its run_end / run_fail / run_pause entry."""
    events = rt.manager.jsonl.event_log(session.tenant_id, session.session_id)
    return events.newest(CLOSING, of_run(session.last_run_id)) is not None


def turn_without_checkpoint(
    rt: RunnerCore, session: ChatSession, events: Any, run_id: str, *, interrupted: bool = False
) -> tuple[str, str] | None:
    """(run id, user text) of a turn recorded as started whose graph never wrote a checkpoint: one
    killed (still RUNNING) or, with `interrupted`, one stopped by Ctrl-C (INTERRUPTED)."""
    last = session.last_run_id
    if not last or last == run_id:
        return None
    if session.last_run_status == RunStatus.RUNNING:
        if run_closed(rt, session):
            return None
    elif not (interrupted and session.last_run_status == RunStatus.INTERRUPTED):
        return None
    entry = events.newest(USER_TURN, of_run(last))
    return None if entry is None else (last, str(entry.payload.get("content") or ""))


def approval_answered(rt: RunnerCore, tenant: str, sid: str, run_id: str, interrupts: Any) -> bool:
    """Whether the pending approval was already acted on: its tool call reached the journal."""
    journal = rt.builder.journal(tenant, sid, None)
    for intr in interrupts or ():
        value = getattr(intr, "value", None)
        call_id = value.get("tool_call_id") if isinstance(value, dict) else None
        if call_id and journal.lookup(run_id, call_id).status is not JournalStatus.NONE:
            return True
    return False
