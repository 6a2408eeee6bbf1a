"""`agentrt store converge` without servers: its options, an empty store, and the periodic claim.

The outage drills (a layer cut, a CLI run that exits, a worker / `agentrt serve` / this command
paying the debt) are in tests/integration/session/test_converge_sweep.py.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from agent.runner import AgentRunner
from agent.session.sweep import SWEEP_LOCK_FILE, maybe_sweep
from tests.cli.console import agentrt
from tests.support.runners import make_config


def test_nothing_owed_is_said_and_exits_0(tmp_path: Path) -> None:
    cfg = str(make_config(tmp_path))
    done = agentrt("store", "converge", "--config", cfg, cwd=tmp_path)
    assert done.code == 0, done.err
    assert "no session owes the SQL or Redis layer a write" in done.out
    as_json = agentrt("--tenant", "acme", "store", "converge", "--config", cfg, "--json", cwd=tmp_path)
    assert as_json.code == 0, as_json.err
    assert json.loads(as_json.out)["sessions"] == []


def test_options_of_another_action_are_refused(tmp_path: Path) -> None:
    cfg = str(make_config(tmp_path))
    for args, said in (
        (("store", "gc", "--tenant", "acme"), "--tenant and --limit are options of `agentrt store converge`"),
        (("store", "converge", "--tenant", "../x"), "tenant id"),
        (("store", "converge", "--limit", "0"), "--limit 0"),
        (("store", "converge", "--dry-run"), "`agentrt doctor` lists the debts"),
    ):
        ran = agentrt(*args, "--config", cfg, cwd=tmp_path)
        assert ran.code == 2, ran.both
        assert said in ran.error_line()


def test_the_periodic_sweep_runs_once_per_interval_and_one_process_at_a_time(tmp_path: Path) -> None:
    """`maybe_sweep` (what the workers and `agentrt serve` run): not while another process holds
    the claim, once, then not again within session.converge_every_s; never when that is null."""
    runner = AgentRunner.from_config(make_config(tmp_path, session={"converge_every_s": 3600}))
    lock = tmp_path / "agentrt" / SWEEP_LOCK_FILE
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process at it
    try:
        assert maybe_sweep(runner) is None
    finally:
        os.close(fd)
    assert maybe_sweep(runner) is not None
    assert maybe_sweep(runner) is None  # ran less than an hour ago
    (tmp_path / "off").mkdir()
    off = AgentRunner.from_config(make_config(tmp_path / "off", session={"converge_every_s": None}))
    assert maybe_sweep(off) is None
