"""What a stopped run left behind: a pending graph step, or a turn killed before its first checkpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.core.errors import SessionError
from agent.core.events import of_run
from agent.core.statuses import RunStatus
from agent.loop.tool_pairs import ToolPairingError, assert_tool_pairs
from agent.runner.branches import head
from agent.runner.reading import light_snapshot
from agent.session.session import ChatSession
from agent.tools.journal import JournalStatus

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner

CLOSING = frozenset({"run_end", "run_fail", "run_pause"})
USER_TURN = frozenset({"user_turn"})
ENDED = frozenset({"run_end"})


def refuse_unfinished(rt: Runner, session: ChatSession, discardable: bool = False) -> None:
    """Raise `SessionError` when the session's last run has not finished (it must be resumed first).

    `discardable`: a run stopped with a step left may be discarded (a new turn over it, see
    `RunOptions.discard_unfinished`), unless it waits for an approval or left tool calls unanswered.
    """
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
        doc = rt.checkpoint_doc(thread) if at.own else None
        events = rt.manager.event_log(session.tenant_id, sid)
        if turn_without_checkpoint(rt, session, events, str((doc or {}).get("run_id") or "")) is not None:
            nodes = ["init"]  # a turn was recorded, then killed before its first checkpoint
    if nodes and ended_past_checkpoint(rt, session):
        return  # the run ended; only checkpoints after its last whole one were lost (see there)
    if nodes and discardable:
        _refuse_undiscardable(rt, session, thread)
        return
    if nodes:
        raise SessionError(
            f"session {sid} has an unfinished run ({session.last_run_status}, next: {', '.join(nodes)}); "
            f"continue it with `agentrt resume {sid}` before starting a new turn"
        )


def _refuse_undiscardable(rt: Runner, session: ChatSession, thread: Any) -> None:
    sid = session.session_id
    snap = rt.graph.get_state(thread)
    if snap.interrupts:
        raise SessionError(
            f"session {sid} is waiting for a human decision: answer it (`agentrt resume {sid} --approve` "
            "or --reject) before starting a new turn"
        )
    try:
        assert_tool_pairs(list((snap.values or {}).get("messages") or []))
    except ToolPairingError:
        raise SessionError(
            f"session {sid}: its last run stopped between a model's tool calls and their results; "
            f"continue it with `agentrt resume {sid}` before starting a new turn"
        ) from None


def ended_past_checkpoint(rt: Runner, session: ChatSession) -> bool:
    """Whether the session's last run is recorded COMPLETED, with its `run_end` entry, although
    its checkpoint still shows a step to run.

    A run is closed only after its final checkpoint is durable, so this means the checkpoint log
    lost its last records (a torn tail, cut by the torn-tail rule). The run is over: `resume`
    reports it finished and the next turn starts from the last whole checkpoint (new input
    discards the step that checkpoint still shows). A FAILED run with a step left is not this:
    `resume` retries it.
    """
    if session.last_run_status != RunStatus.COMPLETED or not session.last_run_id:
        return False
    events = rt.manager.event_log(session.tenant_id, session.session_id)
    return events.newest(ENDED, of_run(session.last_run_id)) is not None


def run_closed(rt: Runner, session: ChatSession) -> bool:
    """Whether the session's last run wrote its run_end / run_fail / run_pause entry."""
    events = rt.manager.event_log(session.tenant_id, session.session_id)
    return events.newest(CLOSING, of_run(session.last_run_id)) is not None


def turn_without_checkpoint(
    rt: Runner, session: ChatSession, events: Any, run_id: str, *, interrupted: bool = False
) -> tuple[str, str] | None:
    """(run id, user text) of a turn recorded as started whose graph never wrote a checkpoint: one
    killed (still RUNNING) or, with `interrupted` (what `resume` reruns), one stopped by Ctrl-C
    (INTERRUPTED) or by an error before its graph started (FAILED: e.g. the database went down
    right after the turn was recorded; nothing of it ran, so it is run again, not lost)."""
    last = session.last_run_id
    if not last or last == run_id:
        return None
    if session.last_run_status == RunStatus.RUNNING:
        if run_closed(rt, session):
            return None
    elif not (interrupted and session.last_run_status in (RunStatus.INTERRUPTED, RunStatus.FAILED)):
        return None
    entry = events.newest(USER_TURN, of_run(last))
    return None if entry is None else (last, str(entry.payload.get("content") or ""))


def approval_answered(rt: Runner, tenant: str, sid: str, run_id: str, interrupts: Any) -> bool:
    """Whether the pending approval was already acted on: its tool call reached the journal."""
    journal = rt.builder.journal(tenant, sid, None)
    for intr in interrupts or ():
        value = getattr(intr, "value", None)
        call_id = value.get("tool_call_id") if isinstance(value, dict) else None
        if call_id and journal.lookup(run_id, call_id).status is not JournalStatus.NONE:
            return True
    return False


HITL = frozenset({"hitl_request", "hitl_decision"})


def lost_approval(rt: Runner, session: ChatSession, events: Any, run_id: str) -> dict[str, Any] | None:
    """The approval a PAUSED run waits for when its checkpoint no longer holds the request.

    The run's `hitl_request` entry (tool, args, call id, interrupt id) is recorded after the
    interrupt's writes are durable; a checkpoint log whose last records were torn away shows the
    step that asks again instead. Returns that request when the run is PAUSED, its newest approval
    entry is an unanswered request, and the tool call never reached the journal; else None. A
    decision for it is handed to the re-run step (`Command(resume=...)`), which asks the same
    question and takes the answer at once.
    """
    if session.last_run_status != RunStatus.PAUSED or session.last_run_id != run_id:
        return None
    asked = [e for e in events.entries(HITL) if (e.payload or {}).get("run_id") == run_id]
    if not asked or asked[-1].type != "hitl_request":
        return None
    request = dict(asked[-1].payload or {})
    call_id = request.get("tool_call_id")
    journal = rt.builder.journal(session.tenant_id, session.session_id, None)
    if not call_id or journal.lookup(run_id, str(call_id)).status is not JournalStatus.NONE:
        return None
    return request
