"""ChatSession: status, expiry and turn-guard rules of seed §1."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.core.errors import SessionNotActive
from agent.session.session import ChatSession, PageMessage, SessionStatus

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def make(**kw: object) -> ChatSession:
    """A session last active at T0 with a 30-minute expiry."""
    base: dict[str, object] = {
        "session_id": "s1",
        "agent_id": "a",
        "tenant_id": "t",
        "user_id": "u",
        "last_active_time": T0,
        "expire_minutes": 30,
    }
    base.update(kw)
    return ChatSession.model_validate(base)


def test_has_every_seed_field() -> None:
    """Every field of seed §1 exists in snake_case with a usable default."""
    s = make()
    for name in (
        "session_id",
        "agent_id",
        "tenant_id",
        "user_id",
        "room_id",
        "sandbox_workspace",
        "current_branch_id",
        "current_leaf_entry_id",
        "status",
        "messages",
        "context",
        "loop_count",
        "max_loops",
        "dataset_list",
        "datasets_loaded",
        "last_active_time",
        "expire_minutes",
    ):
        assert hasattr(s, name)
    assert s.status is SessionStatus.ACTIVE and s.current_branch_id == "main"


def test_is_active_needs_status_and_no_expiry() -> None:
    """is_active is true only while ACTIVE and not past the idle limit."""
    s = make()
    assert s.is_active(T0 + timedelta(minutes=29))
    assert not s.is_active(T0 + timedelta(minutes=30))
    assert not make(status=SessionStatus.PAUSED).is_active(T0)


def test_expired_active_session_moves_to_expired_when_seen() -> None:
    """An idle ACTIVE session becomes EXPIRED and then refuses turns."""
    s = make()
    with pytest.raises(SessionNotActive, match="EXPIRED"):
        s.check_can_start_turn(T0 + timedelta(hours=1))
    assert s.status is SessionStatus.EXPIRED


def test_paused_session_refuses_a_plain_turn_and_says_what_to_do() -> None:
    """PAUSED refuses a new turn with a message naming resume, end and fork."""
    s = make(status=SessionStatus.PAUSED)
    with pytest.raises(SessionNotActive) as info:
        s.check_can_start_turn(T0)
    text = str(info.value)
    assert "agentrt resume s1" in text and "end" in text and "fork" in text
    assert s.status is SessionStatus.PAUSED


def test_paused_session_does_not_expire() -> None:
    """Only ACTIVE sessions expire; a PAUSED one waits for its resume."""
    s = make(status=SessionStatus.PAUSED)
    assert not s.refresh_status(T0 + timedelta(days=3))
    assert s.status is SessionStatus.PAUSED


@pytest.mark.parametrize("status", [SessionStatus.ENDED, SessionStatus.EXPIRED])
def test_ended_and_expired_refuse_turns(status: SessionStatus) -> None:
    """ENDED and EXPIRED sessions take no new turns."""
    with pytest.raises(SessionNotActive, match=status.value):
        make(status=status).check_can_start_turn(T0)


def test_max_loops_refuses_with_its_reason() -> None:
    """A session at max_loops refuses the next turn and names the limit."""
    s = make(loop_count=3, max_loops=3)
    with pytest.raises(SessionNotActive, match="max_loops"):
        s.check_can_start_turn(T0)
    make(loop_count=2, max_loops=3).check_can_start_turn(T0)


def test_zero_expire_minutes_never_expires() -> None:
    """expire_minutes <= 0 disables expiry."""
    s = make(expire_minutes=0)
    assert s.expires_at() is None and s.is_active(T0 + timedelta(days=3650))


def test_naive_datetimes_are_taken_as_utc() -> None:
    """A naive last_active_time is stored tz-aware (UTC), so comparisons stay right."""
    s = make(last_active_time=datetime(2026, 1, 1, 12, 0))  # noqa: DTZ001
    assert s.last_active_time == T0 and s.last_active_time.tzinfo is not None


def test_json_document_round_trips_and_rejects_unknown_fields() -> None:
    """to_json/from_json is lossless; a document with an unknown field is refused."""
    s = make(
        messages=[PageMessage(role="user", content='héllo "x"', entry_id="e1", ts=T0)],
        context={"k": [1, 2]},
        dataset_list=["d"],
        last_run_status="COMPLETED",
    )
    assert ChatSession.from_json(s.to_json()) == s
    data = s.to_dict()
    data["__class__"] = "os.system"
    with pytest.raises(ValueError):
        ChatSession.from_json(data)
