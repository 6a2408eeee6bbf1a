"""Fixes found in review: duplicate tool-call ids, secrets in events, skill enforcement, ids, crash windows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.runner import AgentRunner
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id
from tests.support.runners import make_config

ROOT = Path(__file__).resolve().parents[2]
PLAN = {"content": '{"plan": "p", "todos": ["x"]}'}


def test_duplicate_tool_call_ids_cannot_smuggle_a_rejected_call(tmp_path: Path) -> None:
    """Two calls sharing an id get distinct ids; rejecting the first keeps it from running."""
    dup = {
        "tool_calls": [
            {"id": "dup", "name": "publish_report", "args": {"path": "secret.txt", "channel": "public"}},
            {"id": "dup", "name": "publish_report", "args": {"path": "r.md", "channel": "team"}},
        ]
    }
    write = {
        "tool_calls": [
            {"name": "write_file", "args": {"path": "secret.txt", "content": "s"}},
            {"name": "write_file", "args": {"path": "r.md", "content": "r"}},
        ]
    }
    runner = AgentRunner.from_config(make_config(tmp_path, [PLAN, write, dup, {"content": "done"}]))
    first = runner.run("go")
    assert first.status == "PAUSED"
    second = runner.resume(first.session_id, decision={"approved": False, "reason": "no"})
    assert second.status == "PAUSED"
    done = runner.resume(first.session_id, decision={"approved": True})
    assert done.status == "COMPLETED"
    outbox = runner.session_dir("default", first.session_id) / "workspace" / "outbox"
    assert sorted(p.name for p in outbox.iterdir()) == ["team-r.md"]
    ids = [m.tool_call_id for m in runner.state(first.session_id)["messages"] if m.type == "tool"]
    assert len(ids) == len(set(ids)) == 4


def test_tool_arguments_with_secrets_are_redacted_in_events(tmp_path: Path) -> None:
    """An api_key argument and URL credentials never reach events.jsonl."""
    script = [
        PLAN,
        {"tool_calls": [{"name": "shout", "args": {"text": "postgresql://u:TOPSECRET@h/db"}}]},
        {"content": "ok"},
    ]
    cfg = make_config(tmp_path, script, tools={"custom": [{"path": "tests.support.user_tools:shout"}]})
    runner = AgentRunner.from_config(cfg)
    result = runner.run("call it")
    raw = (runner.session_dir("default", result.session_id) / "events.jsonl").read_text()
    assert "TOPSECRET" not in raw and "u:***@h" in raw


def test_skill_limits_the_tools_that_run(tmp_path: Path) -> None:
    """A tool outside the active skill's list is refused even if the model calls it."""
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "calc.yaml").write_text("description: math\ntools: [calculator]\n")
    script = [
        {"content": '{"plan": "p", "todos": ["x"], "skill": "calc"}'},
        {"tool_calls": [{"name": "write_file", "args": {"path": "x.txt", "content": "x"}}]},
        {"content": "ok"},
    ]
    runner = AgentRunner.from_config(make_config(tmp_path, script, skills_dir=str(skills)))
    result = runner.run("try")
    tool = next(m for m in runner.state(result.session_id)["messages"] if m.type == "tool")
    assert "not allowed by the active skill 'calc'" in tool.content
    assert not (runner.session_dir("default", result.session_id) / "workspace" / "x.txt").exists()


def test_ids_with_a_trailing_newline_are_refused() -> None:
    """`abc\\n` is not a valid id (the regex must match the whole string)."""
    with pytest.raises(InvalidIdError):
        validate_id("abc\n")


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.integration
def test_turn_killed_before_its_first_checkpoint_is_run_by_resume(tmp_path: Path) -> None:
    """A second turn killed before any checkpoint is not lost: resume runs it, with its own question."""
    script = [PLAN, {"content": "answer one"}, PLAN, {"content": "answer two"}]
    cfg = str(make_config(tmp_path, script))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert _cli(["run", "--config", cfg, "--new-session", "s-lost", "--json", "first"], env).returncode == 0
    crashed = _cli(
        ["run", "--config", cfg, "--session", "s-lost", "--json", "second"],
        {**env, "AGENTRT_CRASH_AT": "before_checkpoint_put:1"},
    )
    assert crashed.returncode == 137
    refused = _cli(["run", "--config", cfg, "--session", "s-lost", "third"], env)
    assert refused.returncode == 4 and "unfinished run" in refused.stderr
    resumed = _cli(["resume", "s-lost", "--config", cfg, "--json"], env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["answer"] == "answer two"
    state = AgentRunner.from_config(cfg).state("s-lost")
    assert [m.content for m in state["messages"] if m.type == "human"] == ["first", "second"]


@pytest.mark.integration
def test_crash_after_an_approval_does_not_ask_again(tmp_path: Path) -> None:
    """Approved, then killed after the tool ran: resume finishes without a decision, and --reject is refused."""
    script = [
        PLAN,
        {"tool_calls": [{"name": "write_file", "args": {"path": "r.md", "content": "r"}}]},
        {"tool_calls": [{"name": "publish_report", "args": {"path": "r.md"}}]},
        {"content": "done"},
    ]
    cfg = str(make_config(tmp_path, script))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert (
        json.loads(_cli(["run", "--config", cfg, "--new-session", "s-ap", "--json", "x"], env).stdout)["status"]
        == "PAUSED"
    )
    crashed = _cli(
        ["resume", "s-ap", "--config", cfg, "--approve", "--json"], {**env, "AGENTRT_CRASH_AT": "after_tool_execute:1"}
    )
    assert crashed.returncode == 137
    rejected = _cli(["resume", "s-ap", "--config", cfg, "--reject"], env)
    assert rejected.returncode == 4 and "already answered" in rejected.stderr
    done = _cli(["resume", "s-ap", "--config", cfg, "--json"], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "COMPLETED"
    outbox = tmp_path / "agentrt" / "tenants" / "default" / "sessions" / "s-ap" / "workspace" / "outbox"
    assert [p.name for p in outbox.iterdir()] == ["team-r.md"]
