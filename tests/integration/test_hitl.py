"""Human in the loop: approve, reject, a crash while paused, and plain turns refused while paused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.core.errors import SessionNotActive
from agent.runner import AgentRunner
from tests.support.runners import make_config

PLAN = {"content": '{"plan": "publish", "todos": ["write", "publish"]}'}
WRITE = {"tool_calls": [{"name": "write_file", "args": {"path": "r.md", "content": "# r\n"}}]}
PUBLISH = {"tool_calls": [{"name": "publish_report", "args": {"path": "r.md", "channel": "team"}}]}
DONE = {"content": "done"}
SCRIPT = [PLAN, WRITE, PUBLISH, DONE]


def _paused(tmp_path: Path) -> tuple[AgentRunner, str]:
    runner = AgentRunner.from_config(make_config(tmp_path, SCRIPT))
    result = runner.run("write and publish")
    assert result.status == "PAUSED"
    assert result.pending_approval[0]["name"] == "publish_report"
    return runner, result.session_id


def test_approve_runs_the_tool_once(tmp_path: Path) -> None:
    """After --approve the unsafe tool runs and the run completes."""
    runner, sid = _paused(tmp_path)
    room = runner.session_dir("default", sid) / "workspace"
    assert not (room / "outbox").exists()
    result = runner.resume(sid, decision={"approved": True})
    assert result.status == "COMPLETED" and result.answer == "done"
    assert (room / "outbox" / "team-r.md").read_text() == "# r\n"
    session = runner.manager.get("default", sid)
    assert session.status.value == "ACTIVE"
    types = [e.type for e in runner.manager.event_log("default", sid).entries()]
    assert "hitl_request" in types and "hitl_decision" in types


def test_reject_tells_the_model_and_skips_the_tool(tmp_path: Path) -> None:
    """A rejection becomes the tool's result (with the reason); the tool never runs."""
    runner, sid = _paused(tmp_path)
    result = runner.resume(sid, decision={"approved": False, "reason": "not today"})
    assert result.status == "COMPLETED"
    room = runner.session_dir("default", sid) / "workspace"
    assert not (room / "outbox").exists()
    tool_msgs = [m for m in runner.state(sid)["messages"] if m.type == "tool"]
    assert "rejected by the human reviewer: not today" in tool_msgs[-1].content


def test_plain_turn_refused_while_paused(tmp_path: Path) -> None:
    """A PAUSED session refuses a new user turn and says how to go on."""
    runner, sid = _paused(tmp_path)
    with pytest.raises(SessionNotActive, match="resume it"):
        runner.run("something else", session_id=sid)


def test_resume_without_a_decision_says_what_is_needed(tmp_path: Path) -> None:
    """Resuming a session that waits for approval without --approve/--reject is a clear error."""
    runner, sid = _paused(tmp_path)
    with pytest.raises(Exception, match="--approve or --reject"):
        runner.resume(sid)


def test_crash_while_paused_then_approve(tmp_path: Path) -> None:
    """The pending approval survives the process dying (SIGKILL); a new process approves and finishes."""
    cfg = make_config(tmp_path, SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    code = (
        "import os, sys\n"
        "from agent.runner import AgentRunner\n"
        f"r = AgentRunner.from_config({str(cfg)!r})\n"
        "res = r.run('write and publish', new_session_id='s-paused')\n"
        "print(res.status, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9 and proc.stdout.strip() == "PAUSED"
    out = subprocess.run(
        [sys.executable, "-m", "agent.cli", "resume", "s-paused", "--config", str(cfg), "--approve", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "COMPLETED" and result["answer"] == "done"
    room = tmp_path / "agentrt" / "tenants" / "default" / "sessions" / "s-paused" / "workspace"
    assert (room / "outbox" / "team-r.md").exists()


def test_show_of_a_paused_session_names_the_waiting_node_and_checkpoint(tmp_path: Path) -> None:
    """`show` (which reads only the checkpoint head, not the history) names the node the run waits
    in and the newest checkpoint, as the full graph state does; both are empty once it finished."""
    runner, sid = _paused(tmp_path)
    full = runner.graph.get_state({"configurable": {"thread_id": sid, "tenant_id": "default"}})
    shown = runner.show(sid)["checkpoint"]
    assert shown["next"] == list(full.next) and shown["next"]
    assert shown["checkpoint_id"] == full.config["configurable"]["checkpoint_id"]
    runner.resume(sid, decision={"approved": True})
    assert runner.show(sid)["checkpoint"]["next"] == []
