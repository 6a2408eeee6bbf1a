"""`agentrt resume` of a session whose run already finished: it says so and prints the same result."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.crash import (
    DRILL_TEXT,
    SIGKILL_CODE,
    child_env,
    make_drill_config,
    run_cli,
    session_path,
)
from tests.support.zygote import Zygote

SID = "done-1"
LAST_CHECKPOINT = 20  # checkpoint puts of one drill run (see test_crash_drills)


def test_resume_of_finished_session_prints_its_result(tmp_path: Path) -> None:
    """Resuming a finished session says it had finished; --json is the `run --json` object, unchanged."""
    cfg = make_drill_config(tmp_path)
    env = child_env(tmp_path / "counter")
    ran = run_cli(["run", "--config", str(cfg), "--new-session", SID, "--json", DRILL_TEXT], env)
    assert ran.code == 0, ran.stderr
    resumed = run_cli(["resume", SID, "--config", str(cfg), "--json"], env)
    assert resumed.code == 0, resumed.stderr
    assert json.loads(resumed.stdout) == json.loads(ran.stdout)
    human = run_cli(["resume", SID, "--config", str(cfg)], env)
    assert human.code == 0
    assert "the last run had already finished" in human.stderr
    assert json.loads(ran.stdout)["answer"] in " ".join(human.stdout.split())
    assert "status COMPLETED" in human.stderr  # stdout holds only the answer
    assert (tmp_path / "counter").read_text().splitlines() == ["alpha", "beta", "gamma", "delta", "epsilon"]


def test_resume_closes_a_run_killed_after_its_last_checkpoint(tmp_path: Path) -> None:
    """A run killed after its final checkpoint is closed by resume: COMPLETED, one answer on the page."""
    cfg = make_drill_config(tmp_path)
    env = child_env(tmp_path / "counter")
    with Zygote(tmp_path) as z:
        crashed = z.run(
            ["run", "--config", str(cfg), "--new-session", SID, "--json", DRILL_TEXT],
            {**env, "AGENTRT_CRASH_AT": f"after_checkpoint_put:{LAST_CHECKPOINT}"},
        )
        assert crashed.code == SIGKILL_CODE
        session_file = session_path(cfg, SID) / "session.json"
        assert json.loads(session_file.read_text())["last_run_status"] == "RUNNING"
        first = z.run(["resume", SID, "--config", str(cfg), "--json"], env)
        second = z.run(["resume", SID, "--config", str(cfg), "--json"], env)
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    assert json.loads(first.stdout)["status"] == "COMPLETED"
    assert json.loads(first.stdout) == json.loads(second.stdout)
    session = json.loads(session_file.read_text())
    assert session["last_run_status"] == "COMPLETED"
    answers = [m for m in session["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in answers] == [json.loads(first.stdout)["answer"]]
    log = (session_path(cfg, SID) / "events.jsonl").read_text()
    assert log.count('"type":"run_end"') == 1 and log.count('"type":"assistant_message"') == 1
