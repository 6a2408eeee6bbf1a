"""`agentrt resume` at an approval, through the installed console script with the built-in config:
`--approve-all` finishes a run that paused (or was killed) at one, and `--interrupt` tells an
approval that was never asked (not found) from one already answered (conflict)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

from tests.cli.console import agentrt, env, script

ASK = "Summarise the 2026 sales by region"


def _paused(cwd: Path) -> dict[str, str]:
    """The demo run without a terminal: it pauses at publish_report's approval. Its ids."""
    ran = agentrt("run", "--json", ASK, cwd=cwd)
    assert ran.code == 0, ran.both
    result = json.loads(ran.out)
    assert result["status"] == "PAUSED", result
    return {"session": result["session_id"], "interrupt": result["pending_approval"][0]["interrupt_id"]}


def _killed_at_the_prompt(cwd: Path, timeout: float = 300) -> None:
    """The demo run on a terminal, SIGKILLed while its approval prompt waits for an answer."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [script(), "run", ASK], cwd=cwd, env=env(TERM="xterm"), stdin=slave, stdout=slave, stderr=slave
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while b"[y/N]" not in out and time.monotonic() < deadline and proc.poll() is None:
            if select.select([master], [], [], 0.5)[0]:
                out += os.read(master, 65536)
        assert b"[y/N]" in out, out.decode("utf-8", "replace")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        os.close(master)


def _last_run(cwd: Path, sid: str) -> str:
    """The status of the session's last run, as `show --json` reports it."""
    shown = agentrt("show", sid, "--json", cwd=cwd)
    assert shown.code == 0, shown.both
    return str(json.loads(shown.out)["session"]["last_run_status"])


def test_resume_approve_all_finishes_a_run_paused_at_an_approval(tmp_path: Path):
    """A run paused for approval: `resume ID --approve-all` approves it and the run completes, the
    report published."""
    ids = _paused(tmp_path)
    ran = agentrt("resume", ids["session"], "--approve-all", "--json", cwd=tmp_path)
    assert ran.code == 0, ran.both
    result = json.loads(ran.out)
    assert result["status"] == "COMPLETED", result
    assert "published to the team outbox" in result["answer"]


def test_resume_approve_all_finishes_a_run_killed_at_the_approval_prompt(tmp_path: Path):
    """Killed while the prompt waited: a plain `resume` asks for a decision (exit 4);
    `resume ID --approve-all` completes the run."""
    _killed_at_the_prompt(tmp_path)
    listed = agentrt("sessions", "--json", cwd=tmp_path)
    (sid,) = [s["session_id"] for s in json.loads(listed.out)]
    plain = agentrt("resume", sid, cwd=tmp_path)
    assert plain.code == 4 and "waiting for a human decision" in plain.error_line(), plain.both
    ran = agentrt("resume", sid, "--approve-all", cwd=tmp_path)
    assert ran.code == 0, ran.both
    assert "status COMPLETED" in ran.err and "published to the team outbox" in ran.out
    assert _last_run(tmp_path, sid) == "COMPLETED"


def test_an_approval_never_asked_is_not_found_and_one_answered_is_a_conflict(tmp_path: Path):
    """`--interrupt` with an id the session never asked: exit 3, nothing changed (still PAUSED); the
    id it asked, once answered: exit 4 "no longer pending"."""
    ids = _paused(tmp_path)
    sid = ids["session"]
    never = agentrt("resume", sid, "--approve", "--interrupt", "i-never-asked", cwd=tmp_path)
    assert never.code == 3, never.both
    assert "never asked for approval i-never-asked" in never.error_line()
    assert _last_run(tmp_path, sid) == "PAUSED"
    assert agentrt("resume", sid, "--approve", "--interrupt", ids["interrupt"], cwd=tmp_path).code == 0
    again = agentrt("resume", sid, "--approve", "--interrupt", ids["interrupt"], cwd=tmp_path)
    assert again.code == 4 and "no longer pending" in again.error_line(), again.both
    still_never = agentrt("resume", sid, "--reject", "--interrupt", "i-never-asked", cwd=tmp_path)
    assert still_never.code == 3, still_never.both
