"""A cron's schedule: 5 fields read by croniter in UTC; its next run respects `enabled` and `end_time`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from agent.serve.crons import check_schedule, check_time, firing_run_id, firing_thread_id, iso, next_time, plan_next

NOON = datetime(2026, 3, 10, 12, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize("text", ["* * * * *", "0 9 * * 1-5", "*/15  3 1 * *", "0 0 29 2 *"])
def test_five_field_expressions_are_schedules(text: str) -> None:
    assert check_schedule(text) == " ".join(text.split())


@pytest.mark.parametrize("text", ["", "@daily", "* * * *", "0 * * * * *", "61 * * * *", "every minute", "0 0 30 2 *"])
def test_anything_else_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"5-field cron expression|names no time"):
        check_schedule(text)


def test_next_time_is_strictly_after_and_in_utc() -> None:
    assert next_time("* * * * *", NOON) == datetime(2026, 3, 10, 12, 1, tzinfo=UTC)
    paris = NOON.astimezone(timezone(timedelta(hours=1)))
    assert next_time("0 13 * * *", paris) == datetime(2026, 3, 10, 13, 0, tzinfo=UTC)


def test_disabled_or_ended_crons_have_no_next_run() -> None:
    cron = {"schedule": "0 13 * * *", "enabled": True, "end_time": None}
    assert plan_next(cron, NOON) == "2026-03-10T13:00:00+00:00"
    assert plan_next({**cron, "enabled": False}, NOON) is None
    assert plan_next({**cron, "end_time": "2026-03-10T12:59:00+00:00"}, NOON) is None
    assert plan_next({**cron, "end_time": "2026-03-10T13:00:00+00:00"}, NOON) is not None


def test_a_time_without_a_zone_is_utc() -> None:
    assert check_time(datetime(2026, 1, 1, 9, 0)) == datetime(2026, 1, 1, 9, 0, tzinfo=UTC)  # noqa: DTZ001
    with pytest.raises(ValueError, match="out of range"):
        check_time(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))))


def test_a_firings_run_id_is_the_same_on_every_server_and_sorts_by_the_firings_time() -> None:
    """The id a firing's run gets: the same for the same firing (a server taking it over finds the
    run), another for another cron, tenant or time; a UUIDv7 whose time is the firing's, so runs
    sort by creation as every run id does."""
    fired = iso(NOON)
    assert fired is not None
    one = firing_run_id("acme", "c1", fired)
    assert one == firing_run_id("acme", "c1", fired)
    later = iso(NOON + timedelta(milliseconds=1)) or ""
    others = {
        firing_run_id("acme", "c2", fired),
        firing_run_id("globex", "c1", fired),
        firing_run_id("acme", "c1", later),
    }
    assert one not in others and len(others) == 3
    parsed = uuid.UUID(one)
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert parsed.int >> 80 == int(NOON.timestamp() * 1000)
    assert sorted([firing_run_id("acme", "c1", later), one]) == [one, firing_run_id("acme", "c1", later)]
    thread = firing_thread_id("acme", "c1", fired)
    assert thread == firing_thread_id("acme", "c1", fired) and thread not in (
        one,
        firing_thread_id("acme", "c2", fired),
    )
