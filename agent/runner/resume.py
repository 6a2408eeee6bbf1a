"""Resume: the ordered recovery (docs/concepts/recovery.md), then continue, re-run or close the stopped run."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.types import Command

from agent.core.errors import InputError, RecoveryBlocked, SessionError
from agent.core.events import of_run
from agent.core.results import RunEvent, RunResult, pending_approvals, result_from_snapshot
from agent.core.statuses import RunStatus
from agent.runner.approvals import asked_approvals, check_decision, checked_interrupt_id
from agent.runner.blocked import record_blocked
from agent.runner.branches import BranchHead, head
from agent.runner.options import RunOptions
from agent.runner.overrides import CONFIG_KEY as OVERRIDES_KEY
from agent.runner.overrides import decode
from agent.runner.reading import light_snapshot
from agent.runner.recovery import check_header, check_identity, compare_pins, restore_messages, step, stored_pins
from agent.runner.turn import Turn, without
from agent.runner.turns import EventRecorder
from agent.runner.unfinished import (
    approval_answered,
    ended_past_checkpoint,
    lost_approval,
    turn_without_checkpoint,
)
from agent.session.lifecycle import SessionAction, allowed, transition
from agent.session.session import ChatSession, SessionStatus

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner

PIN_STEPS = ("state_schema_version", "graph_version")
SURFACE_PINS = ("tool_shape_hash", "permissions_hash", "toolset_hash", "projection_digest", "surface_digest")


class Resume:
    """Resuming a stopped run of a `Runner` (its `resumes`): the ordered recovery, then continue,
    re-run or close the run. `stream` reads top to bottom; the steps it takes follow it."""

    def __init__(self, rt: Runner) -> None:
        self.rt = rt

    def stream(
        self,
        session_id: str,
        tenant_id: str | None,
        user_id: str | None,
        decision: dict[str, Any] | None,
        accept_changes: tuple[str, ...] | list[str],
        operator: str | None,
        reason: str | None,
        interrupt_id: str | None = None,
        options: RunOptions | None = None,
    ) -> Iterator[RunEvent]:
        """`resume` as a stream: a `recovered` event first, then the run's events, then `final`.

        A `decision` applies only to the pending approval `interrupt_id` names (without it: to the only
        one pending); checked under the lease before anything is written (`agent.runner.approvals`).
        `options` may set breakpoints for the continued run (`agent.runner.options`).
        """
        rt = self.rt
        tenant, user, sid = rt.ids(session_id, tenant_id, user_id)
        interrupt_id = checked_interrupt_id(interrupt_id)
        if interrupt_id is not None and decision is None:
            raise InputError(f"--interrupt {interrupt_id} names an approval to answer: add --approve or --reject")
        session = _resumable(rt.manager.get(tenant, sid, user))
        asked = options.overrides if options is not None else None
        events = rt.manager.event_log(tenant, sid)
        try:
            with step("read_header"):
                header = events.header()
            check_header(header, session)
        except RecoveryBlocked as err:
            record_blocked(rt, session, None, err)
            raise
        with rt.turn(tenant, sid) as turn:
            # Re-read under the lease: the process that held it before may have moved the session on
            # (answered the approval, or ended the session).
            rt.manager.l1.delete(tenant, sid)
            session = _resumable(rt.manager.get(tenant, sid, user))
            recorder = turn.open(session, session.last_run_id or "")
            try:
                with step("validate_identity"):  # a file recovery cannot read blocks it (e.g. format 1)
                    at = head(rt, session)  # the checkpoint of the branch being run, not the thread's newest
            except RecoveryBlocked as err:
                record_blocked(rt, session, turn.token, err)
                raise
            if not at.own:
                lost_first = turn_without_checkpoint(rt, session, events, "", interrupted=True)
                if lost_first is not None:  # the branch's first turn died before its first checkpoint
                    if decision is not None:
                        check_decision(sid, [], False, interrupt_id, lambda: asked_approvals(events))  # raises
                    yield from _rerun_lost_turn(turn, lost_first, None, {}, at, asked)
                    return
                if at.checkpoint_id is not None and not (options is not None and options.from_fork_point):
                    raise SessionError(
                        f"session {sid}: branch {session.current_branch_id} has not run a turn yet, so there is "
                        f'nothing to resume; start one with `agentrt run --session {sid} "..."`'
                    )
            try:
                doc, snap, accepted, overrides = self._recover(session, events, set(accept_changes), at, options)
            except RecoveryBlocked as err:
                record_blocked(rt, session, turn.token, err)
                raise
            run_id = str(doc.get("run_id") or session.last_run_id or "main")
            recorder.run_id = run_id
            # A step whose writes were saved but whose checkpoint was not (crash between
            # put_writes and put) has no `next` yet still a task: only no task at all is finished.
            pending = list(snap.next) or [t.name for t in snap.tasks]
            answered = bool(snap.interrupts) and approval_answered(rt, tenant, sid, run_id, snap.interrupts)
            lost = lost_approval(rt, session, events, run_id) if pending and not snap.interrupts else None
            if decision is not None:
                waiting = [lost] if lost is not None else pending_approvals(snap) if pending else []
                interrupt_id = check_decision(sid, waiting, answered, interrupt_id, lambda: asked_approvals(events))
            lost_turn = turn_without_checkpoint(rt, session, events, run_id, interrupted=True) if not pending else None
            if lost_turn is not None:
                # A turn lost before its first checkpoint recorded nothing of its settings: those asked now.
                yield from _rerun_lost_turn(turn, lost_turn, doc, accepted, at, asked)
                return
            if not pending and not at.own:  # a new branch going on from a finished checkpoint
                yield from self._at_fork_point(session, doc, run_id, at)
                return
            if not pending:
                yield from self._finished(session, events, recorder, doc, run_id, at, snap)
                return
            if run_id == session.last_run_id and ended_past_checkpoint(rt, session):
                yield from _ended(session, events, doc, run_id, snap)
                return
            if snap.interrupts and decision is None and not answered:
                ids = [str(i.id) for i in snap.interrupts]
                named = f" --interrupt {ids[0]}" if len(ids) == 1 else ""
                raise SessionError(
                    f"session {sid} is waiting for a human decision: resume with --approve or --reject "
                    f"(`agentrt resume {sid} --approve{named}`)"
                )
            if session.status is SessionStatus.PAUSED:
                rt.manager.reactivate(session)
            if accepted:
                recorder.record(
                    "recovery_override",
                    {"run_id": run_id, "accepted": accepted, "operator": operator or session.user_id, "reason": reason},
                )
            replayed = rt.builder.journal(tenant, sid, turn.token).completed_count(run_id)
            info = {
                "checkpoint_id": doc.get("checkpoint_id"),
                "next_nodes": pending,
                "run_id": run_id,
                "tool_calls_done": _tool_calls_done(events, run_id),
                "journal_completed": replayed,
                "accepted": accepted,
            }
            recorder.record("run_resume", info)
            yield RunEvent("recovered", info)
            rt.manager.mark_run(session, run_id, RunStatus.RUNNING)
            asks = (bool(snap.interrupts) and not answered) or lost is not None
            graph_input: Command[Any] | None = Command(resume=decision) if asks and decision is not None else None
            if decision is not None:
                recorder.record("hitl_decision", {"run_id": run_id, "interrupt_id": interrupt_id, **decision})
            turn.overrides = overrides
            yield from turn.stream(graph_input, options, **at.run_extra())

    def _recover(
        self, session: ChatSession, events: Any, accept: set[str], at: BranchHead, options: RunOptions | None
    ) -> tuple[dict[str, Any], Any, dict[str, Any], dict[str, Any]]:
        """Validate identity and pins, restore the state and its messages: (checkpoint doc, snapshot,
        re-pinned, the run's overrides). The run continues under the settings overrides it recorded in
        its checkpoint, unless `options` name overrides of their own (checked against the pins then)."""
        thread = at.config(session.tenant_id, session.session_id)
        with step("validate_identity"):
            doc = self.rt.checkpoint_doc(thread)
        if doc is None:
            raise SessionError(f"session {session.session_id} has no checkpoint: there is nothing to resume")
        asked = options.overrides if options is not None else None
        overrides = dict(asked) if asked else decode((doc.get("metadata") or {}).get(OVERRIDES_KEY))
        pins = self.rt.pins_for(overrides)
        check_identity(doc, session, self.rt.settings.session.agent_id, set(events.branches()) | {"main"})
        found = stored_pins(doc)
        accepted = compare_pins(found, pins, accept, PIN_STEPS)
        with step("restore_state"):
            # The tail first: a run with nothing left to do needs none of its history (see `_finished`).
            snap = light_snapshot(self.rt, thread)
            if snap.next or snap.tasks:
                snap = self.rt.graph.get_state(thread)
        accepted |= compare_pins(found, pins, accept, SURFACE_PINS)
        if snap.next or snap.tasks:
            restore_messages(dict(snap.values or {}))
        return doc, snap, accepted, overrides

    def _finished(
        self,
        session: ChatSession,
        events: Any,
        recorder: EventRecorder,
        doc: dict[str, Any],
        run_id: str,
        at: BranchHead,
        snap: Any,
    ) -> Iterator[RunEvent]:
        """The graph had finished: reopen a PAUSED session, close the run if its end was lost, report it."""
        if session.status is SessionStatus.PAUSED:
            self.rt.manager.reactivate(session)
        done = {"finished": True, "checkpoint_id": doc.get("checkpoint_id"), "run_id": run_id}
        yield RunEvent("recovered", done)
        # Recovery read the tail only (under the lease: nothing wrote a checkpoint since). A completed run
        # that was closed has its answer on the page; any other needs the state (its answer, its close).
        res = result_from_snapshot(session.session_id, snap)
        res.run_id = run_id
        closed = res.status == RunStatus.COMPLETED and session.last_run_status == res.status
        answer = events.newest(frozenset({"assistant_message"}), of_run(run_id)) if closed else None
        if closed and session.last_run_id == run_id and answer is not None:
            res.answer = str((answer.payload or {}).get("content") or "")
        else:
            with step("restore_state"):
                full = self.rt.graph.get_state(at.config(session.tenant_id, session.session_id))
            restore_messages(dict(full.values or {}))
            res = result_from_snapshot(session.session_id, full)
            res.run_id = run_id
            self._close_finished_run(session, events, recorder, res, at)
        # Same object shape as `run --json`; the `recovered` event says it had finished.
        yield RunEvent("final", res.to_json())

    def _at_fork_point(
        self, session: ChatSession, doc: dict[str, Any], run_id: str, at: BranchHead
    ) -> Iterator[RunEvent]:
        """A new branch whose fork point has nothing left to run (`RunOptions.from_fork_point`): the
        run ends at once with that checkpoint's state; nothing is written (the run it belongs to was
        closed on the branch it ran on)."""
        yield RunEvent("recovered", {"finished": True, "checkpoint_id": doc.get("checkpoint_id"), "run_id": run_id})
        with step("restore_state"):
            full = self.rt.graph.get_state(at.config(session.tenant_id, session.session_id))
        res = result_from_snapshot(session.session_id, full)
        res.run_id = run_id
        yield RunEvent("final", res.to_json())

    def _close_finished_run(
        self, session: ChatSession, events: Any, recorder: EventRecorder, res: RunResult, at: BranchHead
    ) -> None:
        """A process killed after the graph's last checkpoint but before the run was closed left
        no answer on the page and the run RUNNING: write what is missing, once."""
        if session.last_run_status == res.status and session.last_run_id == res.run_id:
            return
        closing = {"assistant_message", "run_end", "run_fail"}  # only these types matter: skip the others unread
        done = {e.type for e in events.entries(closing) if (e.payload or {}).get("run_id") == res.run_id}
        if res.status == RunStatus.COMPLETED and "assistant_message" not in done:
            self.rt.manager.memory.add_assistant_message(session, res.answer, res.run_id, recorder.token)
        if not done & {"run_end", "run_fail"}:
            kind = "run_end" if res.status == RunStatus.COMPLETED else "run_fail"
            recorder.record(kind, {"run_id": res.run_id, "finish_reason": res.finish_reason, "error": res.error})
        if session.last_run_id and session.last_run_id != res.run_id:
            # A later run is the session's last: it stopped before its turn was recorded (a recorded
            # one is run again, `turn_without_checkpoint`), so nothing of it is left to resume, and
            # the finished run is not the session's to mark again.
            return
        session.context = without(session.context, "fork_checkpoint_id")
        cp_id = at.checkpoint_id
        if cp_id:
            heads = dict(session.context.get("branch_heads") or {})
            heads[session.current_branch_id] = cp_id
            session.context = {**session.context, "branch_heads": heads}
        self.rt.manager.mark_run(session, res.run_id, res.status)


def _resumable(session: ChatSession) -> ChatSession:
    """The session, when the lifecycle table lets it resume (ENDED / EXPIRED raise `LifecycleError`)."""
    if not allowed(session.status, SessionAction.RESUME):
        transition(session.model_copy(), SessionAction.RESUME)  # raises the one-line refusal
    return session


def _rerun_lost_turn(
    turn: Turn,
    lost: tuple[str, str],
    doc: dict[str, Any] | None,
    accepted: dict[str, Any],
    at: BranchHead,
    overrides: Mapping[str, Any] | None = None,
) -> Iterator[RunEvent]:
    """Run a turn that was recorded but killed before its first checkpoint (nothing of it ran)."""
    lost_run, text = lost
    turn.recorder.run_id = lost_run
    info = {
        "checkpoint_id": (doc or {}).get("checkpoint_id"),
        "next_nodes": ["init"],
        "run_id": lost_run,
        "journal_completed": 0,
        "accepted": accepted,
    }
    turn.recorder.record("run_resume", info)
    turn.runner.manager.mark_run(turn.session, lost_run, RunStatus.RUNNING)
    yield RunEvent("recovered", info)
    turn.overrides = overrides
    yield from turn.stream({"user_input": text}, **at.run_extra())


def _ended(session: ChatSession, events: Any, doc: dict[str, Any], run_id: str, snap: Any) -> Iterator[RunEvent]:
    """The run is recorded COMPLETED but its last checkpoints were lost (`ended_past_checkpoint`):
    report it finished, with the answer and finish reason its closing entries recorded; nothing
    is run again and nothing is written."""
    note = (
        f"run {run_id} had completed; its last checkpoints were lost to a torn write, so the next turn "
        f"starts from checkpoint {doc.get('checkpoint_id')}"
    )
    done = {"finished": True, "checkpoint_id": doc.get("checkpoint_id"), "run_id": run_id, "note": note}
    yield RunEvent("recovered", done)
    res = result_from_snapshot(session.session_id, snap)
    res.run_id, res.status = run_id, RunStatus.COMPLETED
    end = events.newest(frozenset({"run_end"}), of_run(run_id))
    res.finish_reason = str((end.payload or {}).get("finish_reason") or "completed")
    answer = events.newest(frozenset({"assistant_message"}), of_run(run_id))
    res.answer = str((answer.payload or {}).get("content") or "") if answer is not None else ""
    yield RunEvent("final", res.to_json())


def _tool_calls_done(events: Any, run_id: str) -> int:
    """The run's tool calls that have a result in the event log: those `agentrt show` lists. State-only
    tools (update_todo) are among them but not in the journal, so `journal_completed` can be fewer."""
    return len(
        {
            e.payload.get("tool_call_id")
            for e in events.entries(frozenset({"tool_result"}))
            if e.payload.get("run_id") == run_id
        }
    )
