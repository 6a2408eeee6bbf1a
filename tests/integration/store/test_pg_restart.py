"""PostgreSQL restarts mid-turn: the turn fails or continues; no record lost, none duplicated.

A session on `persistence.store: postgres` (every record a row) with the PostgreSQL lease, on a
private PostgreSQL server this module owns (`tests.support.pg_server`; never the shared one).
Each command is a real `agentrt` process (forked from `tests.support.zygote`, which pays the
import once; `agentrt db init` made the schema). A turn: plan, an unsafe `bump` (a counter file
outside the store shows how often it really ran), a read-only `nap`, another `bump`, the answer.
While a turn runs, the server is restarted at one of its progress lines (sampled across the turn):
a crash restart (`immediate`: no shutdown checkpoint, the WAL replayed, commits not yet flushed
lost), a clean one (`fast`), or an outage of a few seconds (stop, wait, start).

For every turn, as a user sees it: `agentrt run` either finished it (exit 0) or failed with exit 6
and one line saying what failed (no traceback); the user then does what that line says (`agentrt
resume ID`; a turn that never got recorded is asked again) and the turn's answer comes. Then for the
session: `agentrt show` lists each question and each answer once, in order; the event log's entries
form one intact chain with no run opened or closed twice; the tool journal has no call completed
twice and no end without its intent; every `bump` ran at most once, and exactly once when its call
completed; `agentrt doctor` finds no FAIL.
"""

from __future__ import annotations

from typing import Any

from tests.support.pg_restart_site import Session, Site, at_line, check_session, clean_restart, crash_restart, outage

# -- the drill --------------------------------------------------------------------------------------

# A turn prints about 31 progress lines (its start, node starts, model calls, tool calls and their
# results, its end). Each turn after the first is hit at another one, from the run's start to its
# last step: crash restarts, clean restarts, and one outage.
PLAN: list[tuple[Any, int]] = [
    (crash_restart, 1),
    (crash_restart, 10),
    (crash_restart, 20),
    (crash_restart, 29),
    (clean_restart, 6),
    (outage, 15),
]


def test_restarts_and_an_outage_mid_turn_lose_and_double_nothing(site: Site) -> None:
    """Each turn after the first meets the server going down at another instant; each ends
    answered once, and the session holds every record once."""
    session = Session(site, "s-restarts")
    session.first_turn()
    for n, (disrupt, line) in enumerate(PLAN, start=2):
        session.turn_under(n, f"at progress line {line}", at_line(line), disrupt)
    check_session(session)
