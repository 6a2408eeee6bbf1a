"""Session ids and hostile input through the console script: an unknown --session is an error, never
a new session; --new-session names one; Ctrl-C leaves the session usable; long input and escape
sequences in ids are refused or quoted."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.cli.console import ROOT, Ran, agentrt, env, script


def _json(ran: Ran) -> dict[str, object]:
    assert ran.code == 0, ran.both
    data: dict[str, object] = json.loads(ran.out)
    return data


def _sessions(work: Path, *args: str) -> list[str]:
    listed = json.loads(agentrt("sessions", "--json", *args, cwd=work).out)
    return [str(s["session_id"]) for s in listed]


def _session(work: Path, sid: str) -> dict[str, object]:
    return _json(agentrt("show", sid, "--json", cwd=work))["session"]  # type: ignore[return-value]


def test_unknown_session_is_not_found_and_creates_nothing(tmp_path: Path) -> None:
    """`run --session s-typo`: exit 3, the message names the id, the tenant and `agentrt sessions`."""
    ran = agentrt("run", "--session", "s-typo", "--approve-all", "hello", cwd=tmp_path)
    assert ran.code == 3, ran.both
    assert ran.error_line() == (
        "agentrt: error: no session s-typo for tenant default; `agentrt sessions` lists yours "
        "(a new session: leave out --session, or name it with --new-session ID)"
    )
    assert _sessions(tmp_path) == []
    assert not (tmp_path / ".agentrt" / "tenants" / "default" / "sessions" / "s-typo").exists()


def test_new_session_by_id_then_continue_it_and_other_tenants_do_not_see_it(tmp_path: Path) -> None:
    """--new-session makes it (twice: exit 4); --session continues it; another tenant gets exit 3."""
    first = _json(agentrt("run", "--new-session", "s-mine", "--approve-all", "--json", "Sales", cwd=tmp_path))
    assert (first["session_id"], first["status"]) == ("s-mine", "COMPLETED")

    again = agentrt("run", "--new-session", "s-mine", "--approve-all", "Sales", cwd=tmp_path)
    assert again.code == 4, again.both
    assert "session s-mine already exists for tenant default" in again.error_line()
    assert "agentrt run --session s-mine" in again.error_line()

    other = agentrt("run", "--session", "s-mine", "--tenant", "acme", "Sales", cwd=tmp_path)
    assert other.code == 3, other.both
    assert "no session s-mine for tenant acme; `agentrt sessions` lists yours" in other.error_line()
    assert _sessions(tmp_path, "--tenant", "acme") == []

    second = _json(agentrt("run", "--session", "s-mine", "--approve-all", "--json", "More", cwd=tmp_path))
    assert second["status"] == "COMPLETED" and _session(tmp_path, "s-mine")["loop_count"] == 2
    both = agentrt("run", "--session", "s-mine", "--new-session", "s-x", "hi", cwd=tmp_path)
    assert both.code == 2 and "not allowed with argument" in both.err


def test_ctrl_c_before_the_first_checkpoint_leaves_the_session_usable(tmp_path: Path) -> None:
    """SIGINT after the turn is recorded, before the graph starts: exit 130 naming the real id,
    the session ACTIVE with its run INTERRUPTED; the next `run --session` is accepted."""
    env = {"AGENTRT_INTERRUPT_AT": "turn_recorded:1"}
    ran = agentrt("run", "Summarise the sales", cwd=tmp_path, extra_env=env)
    assert ran.code == 130, ran.both
    line = ran.err.strip().splitlines()[-1]
    found = re.search(r"run of session (s-[0-9a-f]{16}) interrupted", line)
    assert found, ran.err
    sid = found.group(1)
    assert _sessions(tmp_path) == [sid]
    assert f"`agentrt resume {sid}`" in line and f"agentrt run --session {sid}" in line
    session = _session(tmp_path, sid)
    assert (session["status"], session["last_run_status"]) == ("ACTIVE", "INTERRUPTED")

    nxt = _json(agentrt("run", "--session", sid, "--approve-all", "--json", "Summarise the sales", cwd=tmp_path))
    assert nxt["status"] == "COMPLETED" and nxt["session_id"] == sid


def test_ctrl_c_after_the_result_is_printed_exits_with_the_runs_status(tmp_path: Path) -> None:
    """The run finished and its answer is on screen when the Ctrl-C comes: exit 0, no claim that
    nothing ran, the session COMPLETED."""
    env = {"AGENTRT_INTERRUPT_AT": "result_printed:1"}
    ran = agentrt("run", "--approve-all", "Summarise the sales", cwd=tmp_path, extra_env=env)
    assert ran.code == 0, ran.both
    assert "45827.34" in ran.out and "status COMPLETED" in ran.err and "interrupted" not in ran.err
    assert [_session(tmp_path, sid)["last_run_status"] for sid in _sessions(tmp_path)] == ["COMPLETED"]


def test_ctrl_c_then_resume_runs_the_interrupted_turn(tmp_path: Path) -> None:
    """After the same Ctrl-C, `resume` runs the recorded turn from the start (it pauses for the approval)."""
    ran = agentrt(
        "run",
        "--new-session",
        "s-int",
        "Summarise the sales",
        cwd=tmp_path,
        extra_env={"AGENTRT_INTERRUPT_AT": "turn_recorded:1"},
    )
    assert ran.code == 130 and "s-int" in ran.err, ran.both
    resumed = _json(agentrt("resume", "s-int", "--json", cwd=tmp_path))
    assert resumed["status"] == "PAUSED" and resumed["pending_approval"]
    done = _json(agentrt("resume", "s-int", "--approve", "--json", cwd=tmp_path))
    assert done["status"] == "COMPLETED" and "published" in str(done["answer"])


def _next_command_works(work: Path, ran: Ran) -> None:
    """A Ctrl-C'd run: exit 130, one line naming the session and one next command, which succeeds."""
    assert ran.code == 130, ran.both
    assert "Traceback" not in ran.err, ran.err
    line = ran.err.strip().splitlines()[-1]
    if line == "agentrt: interrupted before a run started":
        assert _sessions(work) == [], ran.both  # nothing was created
        return
    found = re.search(r"run of session (s-[0-9a-f]{16}) interrupted; (.*)$", line)
    assert found, ran.err
    sid, hint = found.groups()
    assert _sessions(work) == [sid]
    session = _session(work, sid)
    assert (session["status"], session["last_run_status"]) == ("ACTIVE", "INTERRUPTED")
    if hint.startswith("continue it with"):  # a step is pending: only `resume` is suggested
        assert hint == f"continue it with `agentrt resume {sid}`", line
        nxt = _json(agentrt("resume", sid, "--json", cwd=work))
        if nxt["status"] == "PAUSED":  # the run stopped before its approval: give it
            assert nxt["pending_approval"], nxt
            nxt = _json(agentrt("resume", sid, "--approve", "--json", cwd=work))
    else:
        assert f'agentrt run --session {sid} "..."' in hint, line
        nxt = _json(agentrt("run", "--session", sid, "--approve-all", "--json", "Summarise the sales", cwd=work))
    assert nxt["status"] == "COMPLETED" and nxt["session_id"] == sid, nxt


def test_ctrl_c_while_the_first_checkpoint_is_written_exits_and_names_resume(tmp_path: Path) -> None:
    """SIGINT while the first checkpoint is being put (by LangGraph's background thread): the process
    exits 130 (it used to hang at exit), the line names the session and `resume`, which finishes it."""
    ran = agentrt(
        "run",
        "Summarise the sales",
        cwd=tmp_path,
        extra_env={"AGENTRT_INTERRUPT_AT": "before_checkpoint_put:1"},
        timeout=60,
    )
    assert ran.code == 130 and "continue it with `agentrt resume s-" in ran.err, ran.both
    refused = agentrt("run", "--session", _sessions(tmp_path)[0], "more", cwd=tmp_path)  # a step is pending
    assert refused.code != 0 and "agentrt resume" in refused.error_line()
    _next_command_works(tmp_path, ran)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ctrl_c_at_a_random_instant_exits_with_the_right_next_command(tmp_path: Path, seed: int) -> None:
    """A plain SIGINT after a random (seeded) delay: exit 130 and a usable session, or the run had
    already finished (then it is COMPLETED). A hang fails by the 60 s timeout."""
    delay = random.Random(seed).uniform(0.5, 3.0)
    proc = subprocess.Popen(
        [script(), "run", "--approve-all", "Summarise the sales"],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"agentrt did not exit within 60 s of a Ctrl-C sent after {delay:.2f} s")
    ran = Ran(proc.returncode, out, err)
    if ran.code in (0, -signal.SIGINT) and "status COMPLETED" in ran.both:  # the signal came after the run
        assert [s["last_run_status"] for s in [_session(tmp_path, _sessions(tmp_path)[0])]] == ["COMPLETED"]
        return
    _next_command_works(tmp_path, ran)


def test_input_over_the_limit_is_refused_before_the_run(tmp_path: Path) -> None:
    """loop.max_input_chars (default: from model.context_window): exit 2, nothing created."""
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data["loop"]["max_input_chars"] = 50
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))

    ran = agentrt("run", "--config", str(config), "x" * 51, cwd=tmp_path)
    assert ran.code == 2, ran.both
    assert "input is 51 characters, over the limit of 50 (loop.max_input_chars" in ran.error_line()
    default = agentrt("run", "y" * 64_001, cwd=tmp_path)  # the shipped window: 32000 tokens -> 64000 chars
    assert default.code == 2 and "over the limit of 64000" in default.error_line()
    assert _sessions(tmp_path) == [] and _sessions(tmp_path, "--config", str(config)) == []
    ok = agentrt("run", "--config", str(config), "--approve-all", "x" * 50, cwd=tmp_path)
    assert ok.code == 0, ok.both


@pytest.mark.parametrize("command", ["run", "resume", "show", "end"])
def test_hostile_ids_are_quoted_in_errors(tmp_path: Path, command: str) -> None:
    """An id with a terminal escape and a newline never reaches the screen raw: one quoted error line."""
    hostile = "s\x1b[31mred\nx"
    args = ["run", "--session", hostile, "hi"] if command == "run" else [command, hostile]
    ran = agentrt(*args, cwd=tmp_path)
    assert ran.code in (2, 3), ran.both
    assert "\x1b" not in ran.both
    line = ran.error_line()  # exactly one line: the newline did not split it
    assert "\\x1b[31mred\\nx" in line, line
