"""A fleet on `persistence.store: postgres`: two Celery workers, each on its own base_dir (no
shared files), sharing only PostgreSQL (session table, record store, lease) and the Redis broker.

20 sessions x 3 turns; each turn bumps an unsafe counter kept outside agentrt (Redis), turn 1
writes a room file, turn 2 reads it and writes another, turn 3 reads both. One worker is SIGKILLed
mid-run three times and its base_dir deleted before it restarts: every turn still runs exactly
once, in order, no unsafe tool twice, and every room file is read back as written, whichever
worker (and whichever empty or stale local copy of the room) ran the turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.core.tool_spec import digest_text
from agent.runner import AgentRunner
from agent.session.record_store import close_stores
from agent.tools.execute import unknown_outcome_text
from tests.support.celery_drill import (
    Cluster,
    check_once_in_order,
    open_cluster,
    sigkill_mid_run,
    submit_sessions,
    turn_script,
)

N_SESSIONS = 20
BOUND_S = 150.0
ONE = ("notes/one.txt", "one: written in turn 1")
TWO = ("notes/two.txt", "two: written in turn 2")
CALLS = {
    1: [("write_file", {"path": ONE[0], "content": ONE[1]}), ("nap", {})],
    2: [("read_file", {"path": ONE[0]}), ("write_file", {"path": TWO[0], "content": TWO[1]}), ("nap", {})],
    3: [("read_file", {"path": ONE[0]}), ("read_file", {"path": TWO[0]}), ("nap", {})],
}
READS = {1: [], 2: [ONE[1]], 3: [ONE[1], TWO[1]]}
"""What each turn's read_file calls must return, in order."""


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Cluster]:
    """The fleet's cluster: its own PostgreSQL database (dropped at the end), workers not started."""
    c = open_cluster(
        tmp_path,
        "redis",
        turn_script(3, ("bump",), CALLS),
        store="postgres",
        builtins=("read_file", "write_file"),
    )
    try:
        yield c
    finally:
        c.close()
        close_stores()


def _reads(runner: AgentRunner, c: Cluster, sid: str, run_ids: list[str]) -> dict[int, list[str]]:
    """What each turn's read_file calls returned (the event log keeps each result's digest; a call a
    resume replayed counts once, its last result)."""
    events = runner.manager.event_log(c.tenant, sid).entries()
    wanted = {digest_text(text): text for text in (ONE[1], TWO[1])}
    results: dict[str, tuple[int, str]] = {}
    for e in events:
        if e.type == "tool_result" and e.payload.get("name") == "read_file":
            got = wanted.get(e.payload.get("digest", ""), f"{e.payload.get('status')}: not a file's text")
            results[e.payload["tool_call_id"]] = (run_ids.index(e.payload["run_id"]) + 1, got)
    out: dict[int, list[str]] = {n: [] for n in READS}
    for turn, text in results.values():
        out[turn].append(text)
    return out


def _bumps(runner: AgentRunner, c: Cluster, sid: str) -> dict[str, str]:
    """The last status of each run's bump call, by run id: "success", "unknown" (the call a kill
    interrupted, reported to the model as "outcome unknown" and not run again) or another error."""
    events = runner.manager.event_log(c.tenant, sid).entries()
    out: dict[str, str] = {}
    for e in events:
        if e.type == "tool_result" and e.payload["name"] == "bump":
            unknown = digest_text(unknown_outcome_text("bump", e.payload["tool_call_id"], False))
            status = "unknown" if e.payload["digest"] == unknown else e.payload["status"]
            out[e.payload["run_id"]] = status
    return out


def test_a_fleet_without_shared_files_survives_sigkills_that_wipe_a_workers_base_dir(fleet: Cluster) -> None:
    """20 sessions x 3 turns on w0 and w1; w1 SIGKILLed mid-run 3 times, its base_dir deleted each time."""
    c = fleet
    c.start_worker("w0")
    c.start_worker("w1")
    texts = {f"s{i:02d}": [f"Turn {n} of s{i:02d}." for n in (1, 2, 3)] for i in range(N_SESSIONS)}
    handles = submit_sessions(c, texts)
    sids = sorted(texts)
    sigkill_mid_run(c, "w1", sids, kills=3, bound_s=BOUND_S, wipe=True)

    assert check_once_in_order(c, texts, handles, BOUND_S) >= 1, "no turn was caught mid-run by a kill"
    runner = AgentRunner.from_config(c.config)
    workers: set[str] = set()
    for sid in sids:
        turns = c.turns(sid)
        # who started a turn (a loaded machine may let w1 finish none between its three kills)
        workers |= {str(r["worker"]).split("-", 1)[0] for r in c.inbox(sid).records() if r["kind"] == "started"}
        run_ids = [t.result["run_id"] for t in turns]
        bumps = _bumps(runner, c, sid)
        assert sorted(bumps) == sorted(run_ids), f"{sid}: a turn without its bump call"
        for run_id, status in bumps.items():
            ran = int(c.redis.get(f"{c.keys}:bump-run:{run_id}") or 0)
            # once, or killed between its intent and its result: never again, "outcome unknown"
            # (the kill may fall before or after the effect itself, so it ran at most once)
            assert (ran, status) in ((1, "success"), (0, "unknown"), (1, "unknown")), (
                f"{sid}: bump of {run_id} ran {ran}x ({status})"
            )
        ran_by = [(t.result["worker"].split("-", 1)[0], t.attempts) for t in turns]
        assert _reads(runner, c, sid, run_ids) == READS, (
            f"{sid}: a room file not read back (worker, attempts): {ran_by}"
        )
    assert workers == {"w0", "w1"}, workers
    for name in ("w0", "w1"):  # a machine's base_dir holds only its copies of the rooms
        kept = [f for f in c.base_dir(name).rglob("*") if f.is_file() and "workspace" not in f.parts]
        assert kept == [], f"{name} keeps records on its own disk: {kept[:5]}"
