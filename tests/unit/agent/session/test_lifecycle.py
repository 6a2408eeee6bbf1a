"""The lifecycle table, exhaustively: every allowed and every refused transition, session and run."""

from __future__ import annotations

import itertools

import pytest

from agent.core.errors import EXIT_BUG, LifecycleError, SessionNotActive, exit_code, quote_id
from agent.core.statuses import FinishReason, RunStatus, SessionStatus
from agent.session.lifecycle import RUN_TRANSITIONS, SESSION_TRANSITIONS, SessionAction, allowed, transition
from agent.session.session import ChatSession
from agent.session.session import SessionStatus as ReExported
from nodes import refining

S, A, R = SessionStatus, SessionAction, RunStatus

# The table of docs/concepts/lifecycle.md, written out once more by hand: (from, action) -> to.
EXPECTED_SESSION = {
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
ALL_SESSION_PAIRS = list(itertools.product(SessionStatus, SessionAction))

GOING = {R.RUNNING, R.PAUSED, R.INTERRUPTED, R.COMPLETED, R.FAILED, R.RECOVERY_BLOCKED}
EXPECTED_RUN: dict[RunStatus | None, set[RunStatus]] = {
    None: {R.RUNNING, R.RECOVERY_BLOCKED},
    R.RUNNING: GOING | {R.UNKNOWN},
    R.PAUSED: GOING,
    R.INTERRUPTED: GOING,
    R.FAILED: {R.RUNNING, R.COMPLETED, R.FAILED, R.RECOVERY_BLOCKED},
    R.RECOVERY_BLOCKED: {R.RUNNING, R.PAUSED, R.COMPLETED, R.FAILED, R.RECOVERY_BLOCKED},
    R.UNKNOWN: {R.RUNNING, R.COMPLETED, R.FAILED, R.RECOVERY_BLOCKED, R.UNKNOWN},
    R.COMPLETED: {R.COMPLETED, R.RECOVERY_BLOCKED},
}
ALL_RUN_PAIRS = list(itertools.product([None, *RunStatus], RunStatus))


def session(status: SessionStatus = S.ACTIVE, run: RunStatus | None = None, sid: str = "s1") -> ChatSession:
    s = ChatSession(session_id=sid, agent_id="a", tenant_id="t", user_id="u", status=status)
    if run is not None:
        s.last_run_id, s.last_run_status = "r1", run.value
    return s


def test_the_table_is_the_documented_one() -> None:
    """The module's tables are exactly the ones written out here (and in docs/concepts/lifecycle.md)."""
    assert dict(SESSION_TRANSITIONS) == EXPECTED_SESSION
    assert {k: set(v) for k, v in RUN_TRANSITIONS.items()} == EXPECTED_RUN


@pytest.mark.parametrize(("status", "action"), ALL_SESSION_PAIRS, ids=lambda v: str(v))
def test_every_session_pair_is_allowed_or_refused_as_the_table_says(
    status: SessionStatus, action: SessionAction
) -> None:
    """Allowed: the status becomes the table's; refused: LifecycleError (exit 4), nothing changed."""
    s = session(status)
    before = s.model_dump()
    if (status, action) in EXPECTED_SESSION:
        assert allowed(status, action)
        transition(s, action)
        assert s.status is EXPECTED_SESSION[(status, action)]
    else:
        assert not allowed(status, action)
        with pytest.raises(LifecycleError) as info:
            transition(s, action)
        assert s.model_dump() == before
        text = str(info.value)
        assert "\n" not in text and status.value in text and "s1" in text
        assert ("agentrt resume s1" in text) if status is S.PAUSED else ("agentrt fork s1 --from ENTRY" in text)
        assert exit_code(info.value) == 4 and isinstance(info.value, SessionNotActive)


@pytest.mark.parametrize(("current", "target"), ALL_RUN_PAIRS, ids=lambda v: str(v))
def test_every_run_pair_is_allowed_or_refused_as_the_table_says(current: RunStatus | None, target: RunStatus) -> None:
    """The same run (r1) moving from `current` to `target`: recorded when allowed, else refused."""
    s = session(run=current)
    if target in EXPECTED_RUN[current]:
        transition(s, run_id="r1", run_status=target)
        assert (s.last_run_id, s.last_run_status) == ("r1", target.value)
    else:
        with pytest.raises(LifecycleError, match=f"cannot become {target.value}") as info:
            transition(s, run_id="r1", run_status=target)
        assert (s.last_run_status, s.status) == ((current.value if current else None), S.ACTIVE)
        assert "\n" not in str(info.value) and exit_code(info.value) == 4


def test_a_new_run_id_starts_from_none_whatever_the_last_run_was() -> None:
    """A new turn is a new run: from a COMPLETED run, RUNNING is allowed, COMPLETED is not."""
    s = session(run=R.COMPLETED)
    transition(s, run_id="r2", run_status=R.RUNNING)
    assert (s.last_run_id, s.last_run_status) == ("r2", "RUNNING")
    with pytest.raises(LifecycleError):
        transition(session(run=R.COMPLETED), run_id="r3", run_status=R.COMPLETED)


def test_a_paused_run_pauses_an_active_session() -> None:
    """Run -> PAUSED is the session's `pause` action; ENDED is never paused by a run."""
    s = session(run=R.RUNNING)
    transition(s, run_id="r1", run_status=R.PAUSED)
    assert s.status is S.PAUSED


def test_ended_is_terminal_except_fork() -> None:
    """ENDED: no turn, no pause, no resume, no expire; fork reopens it ACTIVE (a new branch)."""
    for action in (A.TURN, A.PAUSE, A.RESUME, A.EXPIRE):
        with pytest.raises(LifecycleError, match="is ENDED"):
            transition(session(S.ENDED), action)
    assert transition(session(S.ENDED), A.FORK).status is S.ACTIVE


def test_status_enums_and_reexport() -> None:
    """SessionStatus stays importable from agent.session.session; finish reasons match the graph's."""
    assert ReExported is SessionStatus
    assert {f.value for f in FinishReason} == {
        refining.COMPLETED,
        refining.MAX_ITERATIONS,
        refining.TOO_MANY_FAILURES,
        refining.CONTEXT_EXHAUSTED,
        refining.REJECTED,
    }
    assert exit_code(LifecycleError("x")) != EXIT_BUG


def test_hostile_ids_are_quoted_in_refusals() -> None:
    """An id with a terminal escape and a newline is echoed repr-quoted: no ESC byte, no newline."""
    hostile = "s\x1b[31mred\nx"
    with pytest.raises(LifecycleError) as info:
        transition(session(S.ENDED, sid=hostile), A.TURN)
    assert repr(hostile) in str(info.value)
    assert "\x1b" not in str(info.value) and "\n" not in str(info.value)
    assert quote_id(hostile) == repr(hostile)
    assert "\x1b" not in quote_id(hostile) and "\n" not in quote_id(hostile)
    assert quote_id("s-0a1b") == "s-0a1b"
