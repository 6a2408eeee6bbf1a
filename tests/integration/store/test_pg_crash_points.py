"""PostgreSQL crashes at the instants a restart once found stuck: a turn cut off at its first
checkpoint or before it was recorded, and a crash while a tool runs. The turn fails cleanly and
`agentrt resume` (or asking again) finishes it; the drill is `tests.support.pg_restart_site`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import psycopg
import yaml

from tests.support.celery_drill import turn_script
from tests.support.pg_restart_site import (
    BACKEND_DOWN,
    CALLS,
    TOOLS,
    Session,
    Site,
    check_session,
    crash_restart,
)
from tests.support.pg_server import PgServer
from tests.support.runners import make_config

# -- the two instants a restart found stuck (fixed): a turn cut off before its graph started ----------

HOLD = 4242
"""The advisory lock the held inserts wait for."""


@contextmanager
def held_inserts(pg: PgServer, when: str) -> Iterator[psycopg.Connection[Any]]:
    """Inserts of record rows into the streams whose name meets `when` (a condition on `run`)
    wait while the yielded connection holds an advisory lock: a write the server is busy with when
    it goes down. The trigger is dropped afterwards."""
    url = pg.url("agentrt")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION held_insert() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "DECLARE run text; BEGIN SELECT s.run INTO run FROM jsonl_streams s WHERE s.id = NEW.stream; "
            f"IF {when} THEN PERFORM pg_advisory_xact_lock_shared({HOLD}); END IF; RETURN NEW; END $$"
        )
        conn.execute("DROP TRIGGER IF EXISTS held_insert ON jsonl_records")
        conn.execute(
            "CREATE TRIGGER held_insert BEFORE INSERT ON jsonl_records FOR EACH ROW EXECUTE FUNCTION held_insert()"
        )
    holder = psycopg.connect(url, autocommit=True)
    try:
        holder.execute("SELECT pg_advisory_lock(%s)", (HOLD,))
        yield holder
    finally:
        holder.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER IF EXISTS held_insert ON jsonl_records")
            conn.execute("DROP FUNCTION IF EXISTS held_insert()")


def waiting(holder: psycopg.Connection[Any]) -> Callable[[list[str]], bool]:
    """Ready once a statement waits for the held lock."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'"
    return lambda _lines: bool((holder.execute(query).fetchone() or (0,))[0])


def last_run(session: Session) -> tuple[str, str]:
    """(run id, status) of the session's last run, as `agentrt show` prints them."""
    shown = session.cli("show", session.sid)
    found = re.search(r"last run (r-[0-9a-f]+) (\w+)", shown.stdout)
    assert found, shown.stdout + shown.stderr
    return found.group(1), found.group(2)


def test_a_turn_the_crash_cut_off_at_its_first_checkpoint_is_run_again_by_resume(site: Site) -> None:
    """The server dies while the turn's first checkpoint is written: the turn is recorded, its run
    FAILED before its graph started. `resume` runs the turn (it used to refuse it for ever, exit 4:
    "run ... is not started and cannot become COMPLETED")."""
    session = Session(site, "s-first-checkpoint")
    first = session.first_turn()
    with held_inserts(site.pg, "run NOT LIKE '@%'") as holder:
        turn = session.turn_under(2, "at the first checkpoint", waiting(holder), crash_restart, recover=False)
    run_id, status = last_run(session)
    assert run_id != first and status == "FAILED", turn.story()
    session.recover(turn)
    assert turn.steps == ["resume: exit 0"], turn.story()  # the resume answered it
    check_session(session)


def test_a_turn_the_crash_cut_off_before_it_was_recorded_is_asked_again(site: Site) -> None:
    """The server dies at the run's first event-log entry: the run started (the session names it),
    its question was never recorded. `resume` reports the last finished run instead of refusing
    (it used to exit 4 for ever), and asking again answers the turn once."""
    session = Session(site, "s-unrecorded")
    first = session.first_turn()
    with held_inserts(site.pg, "run = '@events'") as holder:
        turn = session.turn_under(2, "at the run's first entry", waiting(holder), crash_restart, recover=False)
    run_id, status = last_run(session)
    assert run_id != first and status == "FAILED", turn.story()
    session.recover(turn)
    assert turn.steps == ["resume: exit 0", "run again: exit 0"], turn.story()
    check_session(session)


def test_a_crash_while_a_tool_runs_fails_the_turn_cleanly_and_resume_finishes_it(site: Site) -> None:
    """The server crashes while a tool runs (`tests.support.pg_tools.crash_database`): the entries
    written since the step's last flush are gone when the run next writes. The run fails with exit 6
    and one error line (recording the failure on an event log that lost its newest entries used to
    end in exit 70, "KeyError: parent entry ... is not in ... events.jsonl"); `resume` finishes it."""
    calls = {**CALLS, 2: [CALLS[2][0], ("crash_database", {"note": "turn-2"}), CALLS[2][2]]}
    crasher = {"path": "tests.support.pg_tools:crash_database", "effect": "read_only"}
    tools = {**TOOLS, "custom": [*TOOLS["custom"], crasher]}
    (site.tmp / "crash-tool").mkdir()
    config = make_config(
        site.tmp / "crash-tool",
        turn_script(2, (), calls),
        **{k: v for k, v in yaml.safe_load(site.config.read_text()).items() if k in ("persistence", "datasets")},
        tools=tools,
        skills_dir=None,
    )
    session = Session(replace(site, config=config), "s-crash-tool")
    session.first_turn()
    turn = session.turn_under(2, "while a tool runs", lambda _lines: False, lambda _pg: None, recover=False)
    assert turn.run.code == BACKEND_DOWN, turn.story() + "\n" + turn.run.stderr
    session.recover(turn)
    assert turn.steps == ["resume: exit 0"], turn.story()
    check_session(session)
