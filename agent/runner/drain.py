"""Draining a session's inbox: what one worker task does, independent of the task engine.

`drain(runner, tenant, session, turn_id, ...)` is the body of the Celery task. It returns at once
when the session has nothing to run (every turn finished: a redelivered task does nothing; or the
oldest open turn waits for a human). Otherwise it takes
the session's drain lease (one drainer per session on every machine; `LeaseHeld` means another
worker is draining: the task retries later) and runs the session's open turns one after the other
in submission order, each to its end or its approval pause:

- a turn never started runs as a new turn (`runner.stream`);
- a turn started by a worker that died or was stopped resumes (`runner.stream_resume`: the
  recovery order's checks, the tool journal, so no completed tool runs again and an unsafe tool in doubt is
  reported), unless its run was never created (the session's last run id is still the one
  recorded before it started), then it runs as a new turn;
- a turn approved after a pause resumes with the human's decision;
- a continuation (`resume` turn, queued by `agentrt serve` for a run without input or an answer to
  an approval the session's own run asked for) resumes the session's unfinished run.

A drainer given its `graph_version` (a worker) first checks, under the lease, that the session's
latest run is of that version (or that it has none): a session of another version is left alone
(`OtherGraphVersion`), and the worker sends the task to that version's queue (agent/runner/routing.py),
unless the operator made the worker adopt that version (`workers.adopt_graph_versions`): then its
turns run here, a resume accepting the graph change (recorded in a `recovery_override` event).

Stopping (SIGTERM) is checked after every node: the run is closed at that step boundary and left
resumable, the lease released, and `Stopping` raised so the task is requeued.

A `live` turn (submitted by `agentrt serve`) has its events published on the `LiveChannel`, and
its client's cancel checked before it starts and after every node: a cancelled turn is closed at
that step boundary (resumable, as `agentrt resume` continues it) and settled as FAILED with
`run_status: INTERRUPTED`. A cancel asking for a rollback (`multitask_strategy: rollback`) also
moves the session back to before the turn's run, here, before the next queued turn can start: the
session is forked at the entry before the run began (the run's entries stay on the branch left).
The turn's result says what became of the run under `rollback`: `forked`, `nothing` (it never
began), `renewed` (a first turn, with no state before it: the session was removed and made again,
empty, its queued turns kept: agent/runner/renewal.py) or `kept` (a continuation of an earlier
run, which cannot be undone this way).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from agent.core.config import AgentSettings
from agent.core.errors import (
    AgentrtError,
    ApprovalNotPending,
    BackendUnavailable,
    LeaseHeld,
    SessionError,
    SessionNotFound,
)
from agent.core.events import of_run
from agent.core.results import RunEvent
from agent.core.statuses import RunStatus
from agent.loop.surface import compute_pins, skills_digest
from agent.runner.agent_runner import AgentRunner
from agent.runner.chunks import GRAPH_EVENT, clean_stop
from agent.runner.live import END, LiveChannel, encode_event
from agent.runner.options import RunOptions
from agent.runner.renewal import renew_session
from agent.runner.routing import session_graph_version
from agent.runner.run_lifecycle import fork_before_run
from agent.runner.services import postgres_lease
from agent.session.inbox import Inbox, Turn, TurnStatus
from agent.session.lease import InProcessLease, LeaseHeartbeat, SessionLease, make_holder
from agent.session.lease_file import FileLease
from agent.session.lease_redis import RedisLease
from agent.session.record_store import inbox as record_inbox
from checkpointing import layout

log = logging.getLogger("agentrt.drain")
DRAIN_KEY_PREFIX = "drain:"
ADOPTER = "workers.adopt_graph_versions"
"""The operator recorded in the `recovery_override` of a run resumed under an adopted graph version."""
CANCELLED = "cancelled by a client of agentrt serve; a run without input (or `agentrt resume`) continues it"
_MEMORY_DRAINS: dict[Any, Any] = {}


class Stopping(Exception):
    """The worker is shutting down: the current turn was left resumable at a step boundary."""


class OtherGraphVersion(Exception):
    """The session runs on another graph version than this worker's: its turns belong on that version's queue."""

    def __init__(self, session_id: str, version: str) -> None:
        super().__init__(f"session {session_id} runs on graph version {version}")
        self.version = version


class Cancelled(Exception):
    """The turn's client cancelled it: its run was left resumable at a step boundary."""


class _Live:
    """One turn's live events and cancel flag (nothing at all for a turn that is not live)."""

    def __init__(self, channel: LiveChannel | None, turn: Turn, worker: str) -> None:
        self.channel = channel if turn.live else None
        self.ids = (turn.tenant_id, turn.session_id, turn.turn_id)
        self.worker = worker
        self.run_id: str | None = None
        """The agentrt run the turn's events belong to (from its `started` event)."""

    def emit(self, ev: RunEvent) -> None:
        if ev.kind == "started":
            self.run_id = str(ev.data.get("run_id") or "") or None
        if self.channel is None:
            return
        kind, data = encode_event(ev)
        if kind in ("started", "recovered") and isinstance(data, dict):
            data = {**data, "worker": self.worker}  # who runs it: shown in the API's Run metadata
        try:
            self.channel.publish(*self.ids, kind, data)
        except BackendUnavailable as err:  # the run goes on; its client reads the outcome from the inbox
            log.warning("turn %s: live events stopped: %s", self.ids[2], err)
            self.channel = None

    def cancelled(self) -> bool:
        try:
            return self.channel is not None and self.channel.cancel_requested(*self.ids)
        except BackendUnavailable as err:
            log.warning("turn %s: cannot read its cancel flag: %s", self.ids[2], err)
            return False

    def stops_after(self, ev: RunEvent) -> bool:
        """Whether the client's cancel stops the run after `ev`: at the next node's end, or (a new
        turn waits to follow it: `multitask_strategy: interrupt`) at the next step it can follow."""
        checkpoint = ev.kind == GRAPH_EVENT and ev.data.get("mode") == "checkpoints"
        if self.channel is None or (ev.kind != "node" and not checkpoint):
            return False
        try:
            mode = self.channel.cancel_mode(*self.ids)
        except BackendUnavailable as err:
            log.warning("turn %s: cannot read its cancel flag: %s", self.ids[2], err)
            return False
        return (mode in ("now", "rollback") and ev.kind == "node") or (mode == "clean" and clean_stop(ev))

    def rollback(self) -> bool:
        """Whether the client's cancel asks for the run to be rolled back."""
        try:
            return self.channel is not None and self.channel.cancel_mode(*self.ids) == "rollback"
        except BackendUnavailable as err:
            log.warning("turn %s: cannot read its cancel flag: %s", self.ids[2], err)
            return False

    def end(self, inbox: Inbox) -> None:
        if self.channel is None:
            return
        turn = inbox.turn(self.ids[2])
        try:
            self.channel.publish(*self.ids, END, {"status": turn.status.value, "result": turn.result})
        except BackendUnavailable as err:
            log.warning("turn %s: cannot publish its end: %s", self.ids[2], err)


def drain_lease(settings: AgentSettings) -> SessionLease:
    """The drain lease: the session lease's kind, under its own keys (the run itself takes the session lease)."""
    kind = settings.persistence.lease
    if kind == "redis":
        return RedisLease(url=settings.persistence.redis_url, key_prefix=DRAIN_KEY_PREFIX)
    if kind == "postgres":
        return postgres_lease(settings, scope="drain")
    if kind == "file":
        return FileLease(layout.drain_leases_root(settings.base_dir))
    return InProcessLease(_MEMORY_DRAINS)


def drain(
    runner: AgentRunner,
    tenant_id: str,
    session_id: str,
    turn_id: str,
    worker: str,
    should_stop: Callable[[], bool] = lambda: False,
    live: LiveChannel | None = None,
    graph_version: str | None = None,
    adopted: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Run the session's open turns in order until `turn_id` is settled; returns that turn's summary.

    `live`: where the events of live turns go (and their cancel flags are read). `graph_version`:
    this drainer's; a session whose latest run is of another version is not touched
    (`OtherGraphVersion`), since its checkpoint could not be resumed here, unless that version is
    one of the `adopted` (`workers.adopt_graph_versions`): then a resume accepts the graph change."""
    inbox = record_inbox(runner.settings, tenant_id, session_id)
    own = inbox.turn(turn_id)
    first = inbox.next_open()
    if first is None or first.status is TurnStatus.PAUSED:
        # Redelivered after its turn finished, or the session waits for a human: nothing to run.
        return own.to_json()
    # Otherwise drain, even when our own turn is done: a drainer that died after finishing it may
    # have left later turns whose own tasks have already returned (behind a pause, then approved).
    lease = drain_lease(runner.settings)
    grant = lease.acquire(tenant_id, session_id, make_holder(), runner.settings.persistence.lease_ttl_s)
    beat = LeaseHeartbeat(lease, grant).start()

    def stop() -> bool:
        return should_stop() or beat.lost is not None

    try:
        # Read under the drain lease: no other drainer can start a run of the session meanwhile.
        found = session_graph_version(runner.settings, tenant_id, session_id) if graph_version else None
        adopting = found if found is not None and found != graph_version else None
        if adopting is not None and adopting not in adopted:
            raise OtherGraphVersion(session_id, adopting)
        while not stop():
            turn = inbox.next_open()
            if turn is None or turn.status is TurnStatus.PAUSED:
                break  # nothing left, or the session waits for a human before its next turn
            _process(runner, inbox, turn, worker, stop, _Live(live, turn, worker), adopting)
        left = inbox.next_open()
        if stop() and left is not None and left.status is not TurnStatus.PAUSED:
            raise Stopping(f"worker {worker} is stopping; session {session_id} is left resumable")
    finally:
        beat.stop()
        lease.release(beat.grant)
    return inbox.turn(turn_id).to_json()


def _process(
    runner: AgentRunner,
    inbox: Inbox,
    turn: Turn,
    worker: str,
    stop: Callable[[], bool],
    live: _Live,
    adopting: str | None = None,
) -> None:
    tenant, sid = inbox.tenant_id, inbox.session_id
    if live.cancelled():
        cancelled = {
            "status": TurnStatus.FAILED,
            "run_status": RunStatus.INTERRUPTED,
            "session_id": sid,
            "error": CANCELLED,
        }
        if live.rollback():
            cancelled["rollback"] = "nothing"
        inbox.mark_done(turn.turn_id, cancelled, worker)
        live.end(inbox)
        return
    # L1 is this process's cache: another worker may have moved the session on since.
    runner.manager.l1.delete(tenant, sid)
    try:
        last = runner.manager.get(tenant, sid, turn.user_id).last_run_id or ""
    except SessionNotFound:
        last = ""
    first = turn.attempts == 0
    inbox.mark_started(turn.turn_id, last if first else turn.baseline_run_id, worker)
    new = False
    try:
        if turn.decision is not None:
            result = _resume_with(runner, turn, turn.decision, stop, live, adopting)
        elif turn.resume:
            result = _resume_with(runner, turn, None, stop, live, adopting)
        elif first or last == turn.baseline_run_id or not _run_began(runner, tenant, sid, last):
            # its run was never created, or died before recording the user's text: nothing of it ran
            new = True
            result = _final(_new_turn(runner, turn, last), stop, live)
        else:
            result = _resume_with(runner, turn, None, stop, live, adopting)
    except (Stopping, LeaseHeld, BackendUnavailable):
        raise  # left RUNNING: the requeued or retried task continues it
    except Cancelled:
        result = {"status": RunStatus.INTERRUPTED, "session_id": sid, "error": CANCELLED}
        if live.rollback():  # the run has let go of the session; no other turn starts before this
            result["rollback"] = _roll_back(runner, tenant, sid, live.run_id if new else None)
    except AgentrtError as err:
        result = {"status": RunStatus.FAILED, "session_id": sid, "error": str(err)}
    except Exception as err:  # a bug must not leave callers waiting forever
        log.exception("turn %s of session %s failed", turn.turn_id, sid)
        result = {"status": RunStatus.FAILED, "session_id": sid, "error": f"{type(err).__name__}: {err}"}
    if result.get("status") == RunStatus.PAUSED:
        inbox.mark_paused(turn.turn_id, result, worker)
    else:
        if result.get("status") != RunStatus.COMPLETED:
            result = {**result, "run_status": result.get("status"), "status": TurnStatus.FAILED}
        inbox.mark_done(turn.turn_id, result, worker)
    live.end(inbox)


def _roll_back(runner: AgentRunner, tenant: str, sid: str, run_id: str | None) -> str:
    """Move the session back to before the cancelled new turn's run (see the module's docstring)."""
    if run_id is None:
        return "kept"
    try:
        forked = fork_before_run(runner.runner, tenant, sid, run_id)
        if forked is False:
            # Renewed here, under the drain lease: the turns queued behind it run on the empty session.
            return "renewed" if renew_session(runner.runner, tenant, sid) else "nothing"
    except Exception as err:  # the run stays, interrupted and resumable, as after a plain cancel
        log.warning("turn of session %s: run %s not rolled back: %s", sid, run_id, err, exc_info=True)
        return "kept"
    return "nothing" if forked is None else "forked"


def _new_turn(runner: AgentRunner, turn: Turn, last: str) -> Iterator[RunEvent]:
    """A turn's run from its start: the first turn of a `--new-session` submit creates the session."""
    create = turn.new_session and not last and not runner.manager.exists(turn.tenant_id, turn.session_id)
    which: dict[str, Any] = {"new_session_id": turn.session_id} if create else {"session_id": turn.session_id}
    return runner.stream(turn.text, tenant_id=turn.tenant_id, user_id=turn.user_id, options=_options(turn), **which)


def _options(turn: Turn) -> RunOptions | None:
    """The options `agentrt serve` asked for the turn's run (None: a plain run): breakpoints, and
    whether a new turn may start over the run it interrupted, or a run continue a new branch from its
    fork point."""
    asked = turn.options or {}
    if not asked:
        return None
    return RunOptions(
        asked.get("before"),
        asked.get("after"),
        bool(asked.get("discard_unfinished")),
        from_fork_point=bool(asked.get("from_fork_point")),
    )


def _run_began(runner: AgentRunner, tenant: str, sid: str, run_id: str) -> bool:
    events = runner.manager.event_log(tenant, sid)
    return events.newest(frozenset({"user_turn"}), of_run(run_id)) is not None


def _resume_with(
    runner: AgentRunner,
    turn: Turn,
    decision: dict[str, Any] | None,
    stop: Callable[[], bool],
    live: _Live,
    adopting: str | None = None,
) -> dict[str, Any]:
    # A run of an adopted graph version goes on under this one: the operator accepted the change in config.
    accept = _adopted_changes(runner, turn, adopting) if adopting else ()
    reason = f"graph version {adopting} adopted by a worker of {runner.pins.graph_version}" if adopting else None

    def events(d: dict[str, Any] | None) -> Iterator[RunEvent]:
        answer = {k: v for k, v in d.items() if k != "interrupt_id"} if d is not None else None
        iid = d.get("interrupt_id") if d is not None else None
        return runner.stream_resume(
            turn.session_id,
            turn.tenant_id,
            turn.user_id,
            decision=answer,
            accept_changes=accept,
            operator=ADOPTER if adopting else None,
            reason=reason,
            interrupt_id=iid,
            options=_options(turn),
        )

    if decision is None:
        return _final(events(None), stop, live)
    try:
        return _final(events(decision), stop, live)
    except ApprovalNotPending as err:
        if err.answered:
            return _final(events(None), stop, live)
        # Another decision moved the run on first: this one changed nothing; the turn is where the run is.
        return runner.result(turn.session_id, turn.tenant_id).to_json()
    except SessionError:
        # The decision was acted on before a crash (the approved call is in the journal): go on without it.
        return _final(events(None), stop, live)


def _adopted_changes(runner: AgentRunner, turn: Turn, version: str) -> tuple[str, ...]:
    """The pins a resume of a run of the adopted `version` accepts: the graph version, and the
    surface digest too when the graph is all that changed in it (it digests the graph version with
    the model and skills, which stay checked)."""
    start = runner.manager.event_log(turn.tenant_id, turn.session_id).newest(frozenset({"run_start"}))
    stored = ((start.payload if start else {}).get("pins") or {}).get("surface_digest")
    skill = skills_digest(runner.builder.skills)
    if stored == compute_pins(runner.settings, runner.toolset, version, skill=skill).surface_digest:
        return ("graph_version", "surface_digest")
    return ("graph_version",)


def _final(events: Iterator[RunEvent], stop: Callable[[], bool], live: _Live) -> dict[str, Any]:
    final: dict[str, Any] = {}
    try:
        for ev in events:
            live.emit(ev)
            if ev.kind == "final":
                final = dict(ev.data)
            elif ev.kind == "node" and stop():
                raise Stopping("stopped at a step boundary")
            elif live.stops_after(ev):
                raise Cancelled(CANCELLED)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    final.pop("note", None)
    return final
