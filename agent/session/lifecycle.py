"""The session lifecycle as one state machine: the status enums and the one transition table.

A session's status changes only through `transition()`; so does the status of its newest run
(`ChatSession.last_run_status`). A transition the tables do not allow raises `LifecycleError`
with one line that says what to do instead.

Session (action on a session in a status -> its new status; a blank cell is refused):

| from \\ action | turn   | pause  | resume | end   | expire  | fork   | switch |
|---------------|--------|--------|--------|-------|---------|--------|--------|
| ACTIVE        | ACTIVE | PAUSED | ACTIVE | ENDED | EXPIRED | ACTIVE | ACTIVE |
| PAUSED        |        | PAUSED | ACTIVE | ENDED | EXPIRED |        |        |
| ENDED         |        |        |        | ENDED |         | ACTIVE |        |
| EXPIRED       |        |        |        | ENDED | EXPIRED | ACTIVE |        |

ENDED and EXPIRED take no new input and no resume: the only way on is `fork`, a new branch of
the same session that starts ACTIVE. A run that pauses for an approval is the `pause` action.

Run (status of the session's newest run -> the statuses it may move to; a new run id starts
from "none"):

| from             | to                                                                   |
|------------------|----------------------------------------------------------------------|
| none             | RUNNING, RECOVERY_BLOCKED                                            |
| RUNNING          | RUNNING, PAUSED, INTERRUPTED, COMPLETED, FAILED, RECOVERY_BLOCKED, UNKNOWN |
| PAUSED           | RUNNING, PAUSED, INTERRUPTED, COMPLETED, FAILED, RECOVERY_BLOCKED    |
| INTERRUPTED      | RUNNING, PAUSED, INTERRUPTED, COMPLETED, FAILED, RECOVERY_BLOCKED    |
| FAILED           | RUNNING, COMPLETED, FAILED, RECOVERY_BLOCKED                         |
| RECOVERY_BLOCKED | RUNNING, PAUSED, COMPLETED, FAILED, RECOVERY_BLOCKED                 |
| UNKNOWN          | RUNNING, COMPLETED, FAILED, RECOVERY_BLOCKED, UNKNOWN                |
| COMPLETED        | COMPLETED, RECOVERY_BLOCKED                                          |

A COMPLETED run never runs again (a new turn is a new run); FAILED, INTERRUPTED and
RECOVERY_BLOCKED runs continue with `agentrt resume`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from agent.core.errors import LifecycleError, quote_id
from agent.core.statuses import RunStatus, SessionStatus

if TYPE_CHECKING:
    from agent.session.session import ChatSession


class SessionAction(StrEnum):
    """What is done to a session (the columns of the session table)."""

    TURN = "turn"
    """A new user turn (new input)."""
    PAUSE = "pause"
    """`agentrt pause`, or a run that stops for a human approval."""
    RESUME = "resume"
    """`agentrt resume`: continue the stopped run."""
    END = "end"
    EXPIRE = "expire"
    """Idle longer than `expire_minutes` (or expired by an operator)."""
    FORK = "fork"
    """A new branch at an earlier entry."""
    SWITCH = "switch"
    """`agentrt switch`: the next turn continues another branch."""


S, A, R = SessionStatus, SessionAction, RunStatus

SESSION_TRANSITIONS: Mapping[tuple[SessionStatus, SessionAction], SessionStatus] = {
    (S.ACTIVE, A.TURN): S.ACTIVE,
    (S.ACTIVE, A.PAUSE): S.PAUSED,
    (S.ACTIVE, A.RESUME): S.ACTIVE,
    (S.ACTIVE, A.END): S.ENDED,
    (S.ACTIVE, A.EXPIRE): S.EXPIRED,
    (S.ACTIVE, A.FORK): S.ACTIVE,
    (S.ACTIVE, A.SWITCH): S.ACTIVE,
    (S.PAUSED, A.PAUSE): S.PAUSED,
    (S.PAUSED, A.RESUME): S.ACTIVE,
    (S.PAUSED, A.END): S.ENDED,
    (S.PAUSED, A.EXPIRE): S.EXPIRED,
    (S.ENDED, A.END): S.ENDED,
    (S.ENDED, A.FORK): S.ACTIVE,
    (S.EXPIRED, A.END): S.ENDED,
    (S.EXPIRED, A.EXPIRE): S.EXPIRED,
    (S.EXPIRED, A.FORK): S.ACTIVE,
}
"""(status, action) -> new status; a pair not in the table is refused."""

_GOING = frozenset({R.RUNNING, R.PAUSED, R.INTERRUPTED, R.COMPLETED, R.FAILED, R.RECOVERY_BLOCKED})
RUN_TRANSITIONS: Mapping[RunStatus | None, frozenset[RunStatus]] = {
    None: frozenset({R.RUNNING, R.RECOVERY_BLOCKED}),
    R.RUNNING: _GOING | {R.UNKNOWN},
    R.PAUSED: _GOING,
    R.INTERRUPTED: _GOING,
    R.FAILED: frozenset({R.RUNNING, R.COMPLETED, R.FAILED, R.RECOVERY_BLOCKED}),
    R.RECOVERY_BLOCKED: frozenset({R.RUNNING, R.PAUSED, R.COMPLETED, R.FAILED, R.RECOVERY_BLOCKED}),
    R.UNKNOWN: frozenset({R.RUNNING, R.COMPLETED, R.FAILED, R.RECOVERY_BLOCKED, R.UNKNOWN}),
    R.COMPLETED: frozenset({R.COMPLETED, R.RECOVERY_BLOCKED}),
}
"""Run status (None: a new run) -> the statuses it may move to."""


def transition(
    session: ChatSession,
    action: SessionAction | None = None,
    *,
    run_id: str | None = None,
    run_status: RunStatus | str | None = None,
) -> ChatSession:
    """Apply one lifecycle change to `session` (in memory; the caller saves it) or raise `LifecycleError`.

    `action` moves the session's status by the session table; `run_id` + `run_status` record the
    newest run's status by the run table (a run that pauses also applies `pause` to an ACTIVE
    session). Both are checked before anything changes.
    """
    new_status = session.status
    if action is not None:
        new_status = _session_target(session, action)
    run: RunStatus | None = None
    if run_status is not None:
        run = _run_target(session, run_id or "", RunStatus(run_status))
        if run is RunStatus.PAUSED and new_status is SessionStatus.ACTIVE:
            new_status = SESSION_TRANSITIONS[(new_status, SessionAction.PAUSE)]
    if new_status is not session.status:
        session.status = new_status
    if run is not None:
        session.last_run_id = run_id or ""
        session.last_run_status = run.value
    if action not in (None, SessionAction.EXPIRE, SessionAction.END) or run is not None:
        session.touch()
    return session


def allowed(status: SessionStatus, action: SessionAction) -> bool:
    """Whether `action` may be done to a session in `status`."""
    return (status, action) in SESSION_TRANSITIONS


def _session_target(session: ChatSession, action: SessionAction) -> SessionStatus:
    target = SESSION_TRANSITIONS.get((session.status, action))
    if target is None:
        raise LifecycleError(refusal(session.session_id, session.status, action, session.expire_minutes))
    return target


def _run_target(session: ChatSession, run_id: str, target: RunStatus) -> RunStatus:
    same_run = bool(session.last_run_id) and session.last_run_id == run_id
    current = RunStatus(session.last_run_status) if same_run and session.last_run_status else None
    if target not in RUN_TRANSITIONS[current]:
        sid = session.session_id
        was = current.value if current is not None else "not started"
        raise LifecycleError(
            f"run {quote_id(run_id)} of session {quote_id(sid)} is {was} and cannot become {target.value}; "
            f"see `agentrt show {quote_id(sid)}` (a finished run is never run again: start a new turn)"
        )
    return target


def refusal(session_id: str, status: SessionStatus, action: SessionAction, expire_minutes: float = 0) -> str:
    """The one-line message of a refused (status, action): what is wrong and what to do."""
    sid = quote_id(session_id)
    fork = f"`agentrt fork {sid} --from ENTRY` (entry ids: `agentrt show {sid}`)"
    if status is SessionStatus.PAUSED:
        if action is SessionAction.FORK:
            return (
                f"session {sid} is PAUSED: resume it with `agentrt resume {sid}`, "
                f"or end it with `agentrt end {sid}` before forking"
            )
        return (
            f"session {sid} is PAUSED: resume it with `agentrt resume {sid}` "
            f"or end it and fork a branch (`agentrt end {sid}`, then `agentrt fork {sid} --from ENTRY`)"
        )
    what = {
        SessionAction.TURN: "takes no new turns",
        SessionAction.RESUME: "cannot be resumed",
        SessionAction.PAUSE: "cannot be paused",
        SessionAction.EXPIRE: "cannot expire",
        SessionAction.SWITCH: "cannot switch branches",
    }.get(action, f"cannot {action.value}")
    if status is SessionStatus.ENDED:
        return f"session {sid} is ENDED and {what}; fork a branch with {fork}, or start a new session"
    idle = f" (idle longer than {expire_minutes:g} minutes)" if expire_minutes > 0 else ""
    return f"session {sid} is {status.value}{idle} and {what}; fork a branch with {fork}, or start a new session"
