"""Submitting turns to the Celery workers and following them: `agentrt submit`, `agentrt wait`.

`submit_turn` reserves the turn id in the tenant's turn index, appends the turn to the session's
inbox (durable before anything is sent), then sends the task; a submitter that dies between the
two leaves a pending turn that the session's next task runs. `TurnHandle.wait()` follows the inbox
on the shared volume, so it needs no result backend round trip and sees a turn finished by any
worker's drain.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from functools import lru_cache
from typing import Any

from celery import Celery

from agent.core.config import AgentSettings, load_settings
from agent.core.errors import BackendUnavailable, ConfigError, SessionExists, SessionNotFound, quote_id
from agent.runner.approvals import check_decision, checked_interrupt_id
from agent.runner.celery_app import TASK_NAME, celery_config
from agent.runner.routing import turn_queue
from agent.session.inbox import Inbox, Turn, TurnStatus, new_turn_id
from agent.session.record_store import event_log as record_event_log
from agent.session.record_store import inbox as record_inbox
from agent.session.record_store import turn_index

RENEWAL_GRACE_S = 5.0
"""How long a turn missing from its session's inbox is looked for again before it is reported unknown."""


class TurnHandle:
    """A submitted turn: `status()`, `turn()`, `wait()`."""

    def __init__(self, settings: AgentSettings, tenant_id: str, session_id: str, turn_id: str) -> None:
        self.tenant_id = tenant_id
        self.session_id = session_id
        self.turn_id = turn_id
        self._inbox = record_inbox(settings, tenant_id, session_id)

    def __repr__(self) -> str:
        return f"TurnHandle({self.turn_id!r}, session={self.session_id!r}, tenant={self.tenant_id!r})"

    def turn(self) -> Turn:
        """The turn as its inbox records say now."""
        deadline = time.monotonic() + RENEWAL_GRACE_S
        while True:
            try:
                return self._inbox.turn(self.turn_id)
            except ConfigError:
                # A session whose first turn was rolled back is made again with its inbox carried
                # over (agent/runner/renewal.py): for a moment its turns are not there to read.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)

    def status(self) -> TurnStatus:
        """PENDING, RUNNING, PAUSED (waits for approval), COMPLETED or FAILED."""
        return self.turn().status

    def wait(self, timeout: float | None = None, poll_s: float = 0.05) -> Turn:
        """Block until the turn is COMPLETED, FAILED or PAUSED; `TimeoutError` after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            turn = self.turn()
            if turn.status.settled:
                return turn
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"turn {self.turn_id} is still {turn.status.value} after {timeout:g} s; "
                    f"wait again with `agentrt wait {self.turn_id}`"
                )
            time.sleep(poll_s)


@lru_cache(maxsize=8)
def _app_for(config_json: str) -> Celery:
    return make_app_from_json(config_json)


def make_app_from_json(config_json: str) -> Celery:
    """A producer app for a serialized Celery configuration."""
    app = Celery("agentrt", set_as_current=False)
    app.conf.update(json.loads(config_json))
    return app


def producer_app(settings: AgentSettings) -> Celery:
    """One cached producer app per distinct configuration (keeps its broker connection pool)."""
    return _app_for(json.dumps(celery_config(settings), sort_keys=True))


def _ids(settings: AgentSettings, session_id: str, tenant_id: str | None) -> tuple[str, str]:
    tenant = tenant_id or settings.session.tenant_id
    record_inbox(settings, tenant, session_id)  # validates both ids
    return tenant, session_id


def _send(settings: AgentSettings, tenant: str, sid: str, turn_id: str, task_id: str) -> None:
    # The queue of the graph version the session runs on (the shared one for a session with no run yet).
    queue = turn_queue(settings, tenant, sid)
    try:
        producer_app(settings).send_task(TASK_NAME, args=[tenant, sid, turn_id], task_id=task_id, queue=queue)
    except Exception as err:  # kombu/redis/amqp errors: the turn is recorded, its task is not
        raise BackendUnavailable(
            f"turn {turn_id} is recorded in session {sid} but the broker did not take its task "
            f"({type(err).__name__}: {err}); check workers.broker_url and that the broker is up. "
            "The turn runs with the session's next submitted turn"
        ) from err


def submit_turn(
    settings: AgentSettings,
    text: str,
    session_id: str,
    tenant_id: str | None = None,
    user_id: str | None = None,
    turn_id: str | None = None,
    live: bool = False,
    new_session: bool = False,
    options: dict[str, Any] | None = None,
) -> TurnHandle:
    """Append a turn to the session and enqueue it; the same text twice is two turns.

    The session must exist for the tenant (and user), else `SessionNotFound`; with `new_session`
    it must not (`SessionExists`), and the turn's run creates it (under the session lease).
    `live`: its worker publishes the run's events for `agentrt serve` (agent/runner/live.py);
    `options` (`{"before", "after", "discard_unfinished"}`): its run's `RunOptions`, as `agentrt serve` asks.
    """
    celery_config(settings)  # no broker configured: say so before recording anything
    tenant, sid = _ids(settings, session_id, tenant_id)
    tid = turn_id or new_turn_id()
    inbox = record_inbox(settings, tenant, sid)
    if not text or not text.strip():
        inbox.submit(text, tid, user_id)  # raises the one-line error
    _check_session(settings, inbox, user_id, new_session)
    turn_index(settings, tenant).reserve(tid, sid)

    def exists() -> bool:  # the session removed and made again since the check above: see `Inbox.seal`
        return record_event_log(settings, tenant, sid).header() is not None

    guard = None if new_session else exists
    inbox.submit(text, tid, user_id, live, new_session=new_session, options=options, exists=guard)
    _send(settings, tenant, sid, tid, tid)
    return TurnHandle(settings, tenant, sid, tid)


def submit_resume(
    settings: AgentSettings,
    session_id: str,
    tenant_id: str | None = None,
    user_id: str | None = None,
    decision: dict[str, Any] | None = None,
    live: bool = False,
    options: dict[str, Any] | None = None,
) -> TurnHandle:
    """Enqueue a continuation of the session's unfinished run (crashed, cancelled, or paused by a run
    that was not submitted, then with the human's `decision`), as `agentrt resume` does in place."""
    celery_config(settings)
    tenant, sid = _ids(settings, session_id, tenant_id)
    tid = new_turn_id()
    turn_index(settings, tenant).reserve(tid, sid)
    record_inbox(settings, tenant, sid).submit_resume(tid, user_id, decision, live, options)
    _send(settings, tenant, sid, tid, tid)
    return TurnHandle(settings, tenant, sid, tid)


def paused_turn(settings: AgentSettings, session_id: str, tenant_id: str | None = None) -> Turn | None:
    """The session's submitted turn that waits for a human's decision, if any."""
    tenant, sid = _ids(settings, session_id, tenant_id)
    return next((t for t in record_inbox(settings, tenant, sid).turns() if t.status is TurnStatus.PAUSED), None)


def _check_session(settings: AgentSettings, inbox: Inbox, user_id: str | None, new_session: bool) -> None:
    """A turn goes to an existing session (or one a queued `--new-session` turn creates); a new one must be new."""
    tenant, sid = inbox.tenant_id, inbox.session_id
    header = record_event_log(settings, tenant, sid).header()
    owner = (header or {}).get("user_id") if header and header.get("tenant_id") == tenant else None
    queued = [t for t in inbox.turns() if t.new_session]
    exists = header is not None or bool(queued)
    if new_session:
        if exists:
            raise SessionExists(
                f"session {quote_id(sid)} already exists for tenant {quote_id(tenant)}; submit to it with "
                f"`agentrt submit --session {quote_id(sid)} ...`, or pick another id"
            )
        return
    creator = (owner if header is not None else queued[0].user_id) if exists else None
    # Another user's session reads exactly as a missing one: whether it exists is not theirs to learn.
    if not exists or (user_id and creator and creator != user_id):
        whose = f"tenant {quote_id(tenant)}" + (f" and user {quote_id(user_id)}" if user_id else "")
        raise SessionNotFound(
            f"no session {quote_id(sid)} for {whose}; `agentrt sessions` lists yours "
            "(a new session: `agentrt submit --new-session ID ...`)"
        )
    if inbox.sealed():  # checked again when the turn is appended; refused here before reserving its id
        raise SessionNotFound(
            f"session {quote_id(sid)} is being made again (its first turn was rolled back); submit again in a moment"
        )


def has_paused_turn(settings: AgentSettings, session_id: str, tenant_id: str | None = None) -> bool:
    """Whether a submitted (worker-run) turn of the session waits for a human's decision."""
    tenant, sid = _ids(settings, session_id, tenant_id)
    return any(t.status is TurnStatus.PAUSED for t in record_inbox(settings, tenant, sid).turns())


def submit_decision(
    settings: AgentSettings,
    session_id: str,
    decision: dict[str, Any],
    tenant_id: str | None = None,
    live: bool = False,
    interrupt_id: str | None = None,
    options: dict[str, Any] | None = None,
) -> TurnHandle:
    """Record the human's answer to the session's paused turn and enqueue its continuation.

    With `interrupt_id` the answer is for that approval only: refused (`ApprovalNotPending`) when
    the paused turn waits for another one, and checked again by the worker under the session lease.
    """
    celery_config(settings)
    tenant, sid = _ids(settings, session_id, tenant_id)
    interrupt_id = checked_interrupt_id(interrupt_id)
    inbox = record_inbox(settings, tenant, sid)
    paused = [t for t in inbox.turns() if t.status is TurnStatus.PAUSED]
    if interrupt_id is not None:
        waiting = [p for t in paused for p in (t.result or {}).get("pending_approval") or []]
        check_decision(sid, waiting, False, interrupt_id)
        decision = {**decision, "interrupt_id": interrupt_id}
    if not paused:
        raise ConfigError(
            f"session {sid} has no submitted turn waiting for approval; see `agentrt show {sid}` "
            "(a turn run with `agentrt run` is resumed in place by `agentrt resume`)"
        )
    turn = paused[0]
    inbox.add_decision(turn.turn_id, decision, live, options)
    _send(settings, tenant, sid, turn.turn_id, f"{turn.turn_id}.{uuid.uuid4().hex[:8]}")
    return TurnHandle(settings, tenant, sid, turn.turn_id)


def handle_for(
    settings: AgentSettings, turn_id: str, tenant_id: str | None = None, user_id: str | None = None
) -> TurnHandle:
    """The handle of a turn submitted earlier (found through the tenant's turn index); with
    `user_id`, only a turn that user submitted."""
    tenant = tenant_id or settings.session.tenant_id
    index = turn_index(settings, tenant)
    if not user_id:
        return TurnHandle(settings, tenant, index.session_of(turn_id), turn_id)
    # Another user's turn reads exactly as a missing one: whether it exists is not theirs to learn.
    theirs = SessionNotFound(
        f"no turn {turn_id} of user {user_id} in tenant {tenant}: check the id `agentrt submit` printed, "
        "--tenant and --user"
    )
    try:
        handle = TurnHandle(settings, tenant, index.session_of(turn_id), turn_id)
    except SessionNotFound:
        raise theirs from None
    owner = handle.turn().user_id
    if owner and owner != user_id:
        raise theirs
    return handle


# --- the command line -----------------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    """agentrt submit --session ID "text": prints the turn id."""
    settings = load_settings(args.config)
    sid = args.session or args.new_session
    new = args.session is None
    handle = submit_turn(settings, " ".join(args.text), sid, args.tenant, args.user, args.turn_id, new_session=new)
    if args.json:
        print(json.dumps({"turn_id": handle.turn_id, "session_id": handle.session_id, "tenant_id": handle.tenant_id}))
    else:
        print(handle.turn_id)
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """agentrt wait TURN_ID: 0 when COMPLETED or PAUSED, 1 when FAILED, 3 on --timeout."""
    settings = load_settings(args.config)
    try:
        turn = handle_for(settings, args.turn_id, args.tenant, args.user).wait(args.timeout)
    except TimeoutError as err:
        print(f"agentrt: {err}")
        return 3
    return print_turn(turn, args.json)


def cmd_queue_decision(args: argparse.Namespace, decision: dict[str, Any], interrupt_id: str | None = None) -> int:
    """`agentrt resume ID --approve/--reject` with workers configured: queue the continuation."""
    settings = load_settings(args.config)
    handle = submit_decision(settings, args.session_id, decision, args.tenant, interrupt_id=interrupt_id)
    print(json.dumps({"turn_id": handle.turn_id, "queued": True}) if args.json else f"queued: {handle.turn_id}")
    return 0


def print_turn(turn: Turn, as_json: bool) -> int:
    """Print a settled turn (one JSON object with --json); the exit code."""
    from agent.core.text import json_safe, printable

    data = turn.to_json()
    if as_json:
        print(json_safe(json.dumps(data, ensure_ascii=False, default=str)))
    else:
        run = data.get("run_id")
        print(printable(f"{turn.status.value}  turn {turn.turn_id}  session {turn.session_id}  run {run}"))
        if data.get("answer"):
            print(printable(str(data["answer"]), keep="\n\t"))
        if data.get("error"):
            print(printable(f"error: {data['error']}", keep="\n\t"))
        if turn.status is TurnStatus.PAUSED:
            print(f"waits for approval: agentrt resume {turn.session_id} --approve (or --reject)")
    return 1 if turn.status is TurnStatus.FAILED else 0


__all__ = ["TurnHandle", "handle_for", "paused_turn", "submit_decision", "submit_resume", "submit_turn"]
