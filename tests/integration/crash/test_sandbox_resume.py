"""Kill right after a file write; the resumed run's room equals its checkpointed sandbox manifest."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.runners import make_config

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = [
    {"content": '{"plan": "p", "todos": ["x"]}'},
    {"tool_calls": [{"name": "write_file", "args": {"path": "notes/a.txt", "content": "alpha"}}]},
    {
        "tool_calls": [
            {"name": "write_file", "args": {"path": "notes/b.txt", "content": "beta"}},
            {"name": "delete_file", "args": {"path": "notes/a.txt"}},
        ]
    },
    {"content": "done"},
]


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize("n", [1, 2, 3])
def test_room_matches_manifest_after_kill_and_resume(tmp_path: Path, n: int) -> None:
    """Crash after the n-th tool call, resume: files equal the final manifest, each effect applied once."""
    cfg = make_config(tmp_path, SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENTRT_CRASH_AT": f"after_tool_execute:{n}"}
    crashed = _cli("run", "--config", str(cfg), "--new-session", "s-room", "--json", "write notes", env=env)
    assert crashed.returncode == 137, crashed.stderr
    env.pop("AGENTRT_CRASH_AT")
    resumed = _cli("resume", "s-room", "--config", str(cfg), "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "COMPLETED"
    room = tmp_path / "agentrt" / "tenants" / "default" / "sessions" / "s-room" / "workspace"
    files = {str(p.relative_to(room)): p.read_bytes() for p in room.rglob("*") if p.is_file()}
    assert files == {"notes/b.txt": b"beta"}
    from agent.runner import AgentRunner

    manifest = AgentRunner.from_config(cfg).state("s-room")["sandbox_manifest"]
    assert manifest == {k: "sha256:" + hashlib.sha256(v).hexdigest() for k, v in files.items()}
