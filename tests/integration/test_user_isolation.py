"""A second user of the same (non-default) tenant cannot read another user's session.

Through the installed `agentrt` console script (PYTHONPATH points at this checkout): `show`,
`doctor` and `tool-result` as user bob on alice's session of tenant acme read as "not found",
print nothing of the session (not its text, not its owner) and exit non-zero; as alice they work,
`tool-result` printing the whole archived result. Another tenant finds nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.runners import ROOT, make_config

SECRET = "alice-private-note-7f3c"
# Above inline_payload_max_bytes (8192): the archived read_file result is blob-backed.
FILE_TEXT = SECRET * 400
SCRIPT: list[dict[str, Any]] = [
    {"content": '{"plan": "p", "todos": ["x"]}'},
    {"tool_calls": [{"name": "write_file", "args": {"path": "a.txt", "content": FILE_TEXT}}]},
    {"tool_calls": [{"name": "read_file", "args": {"path": "a.txt"}}]},
    {"content": f"done: {SECRET}"},
]


def agentrt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the console script with this checkout first on the import path."""
    exe = shutil.which("agentrt")
    assert exe is not None, "the agentrt console script is not installed (pip install -e .)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


@pytest.fixture
def alice_session(tmp_path: Path) -> tuple[str, str]:
    """(config path, session id) of a finished turn of alice in tenant acme, with a tool result."""
    cfg = str(make_config(tmp_path, SCRIPT))
    done = agentrt("run", "--config", cfg, "--tenant", "acme", "--user", "alice", "--json", SECRET, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return cfg, json.loads(done.stdout)["session_id"]


TOOL_RESULT = ["tool-result", "{sid}", "call_3_1", "--limit", "20000"]


@pytest.mark.parametrize(
    "command",
    [["show", "{sid}"], ["doctor", "{sid}"], ["doctor", "{sid}", "--json"], TOOL_RESULT],
    ids=["show", "doctor", "doctor-json", "tool-result"],
)
def test_second_user_of_the_tenant_reads_not_found(
    alice_session: tuple[str, str], command: list[str], tmp_path: Path
) -> None:
    """bob gets "not found" and a non-zero exit; nothing of alice's session reaches his screen."""
    cfg, sid = alice_session
    argv = [c.format(sid=sid) for c in command] + ["--config", cfg, "--tenant", "acme"]
    bob = agentrt(*argv, "--user", "bob", cwd=tmp_path)
    assert bob.returncode != 0
    seen = bob.stdout + bob.stderr
    assert "not found" in seen
    assert SECRET not in seen and "alice" not in seen
    if command[0] == "tool-result":
        assert bob.stdout == ""
        assert f"session {sid} not found for tenant acme and user bob" in bob.stderr
    mine = agentrt(*argv, "--user", "alice", cwd=tmp_path)
    assert "not found" not in mine.stdout + mine.stderr
    assert mine.returncode == 0, mine.stdout + mine.stderr
    if command[0] == "tool-result":
        assert mine.stdout == FILE_TEXT + "\n"  # the whole result, its line ended
    else:
        assert sid in mine.stdout


def test_tool_result_of_another_tenant_is_not_found(alice_session: tuple[str, str], tmp_path: Path) -> None:
    """The same session id and call id asked in another tenant (or the default one) print nothing of it."""
    cfg, sid = alice_session
    argv = [c.format(sid=sid) for c in TOOL_RESULT] + ["--config", cfg]
    for tenant, who in [
        ("other", ["--tenant", "other", "--user", "alice"]),
        ("other", ["--tenant", "other"]),
        ("default", []),
    ]:
        other = agentrt(*argv, *who, cwd=tmp_path)
        assert other.returncode != 0 and other.stdout == "", who
        assert f"session {sid} not found for tenant {tenant}" in other.stderr, who
        assert SECRET not in other.stderr


def test_second_user_does_not_see_it_listed(alice_session: tuple[str, str], tmp_path: Path) -> None:
    """`sessions --user bob` lists none of alice's sessions; `--user alice` lists hers."""
    cfg, sid = alice_session
    bob = agentrt("sessions", "--config", cfg, "--tenant", "acme", "--user", "bob", "--json", cwd=tmp_path)
    assert bob.returncode == 0 and json.loads(bob.stdout) == []
    alice = agentrt("sessions", "--config", cfg, "--tenant", "acme", "--user", "alice", "--json", cwd=tmp_path)
    assert [s["session_id"] for s in json.loads(alice.stdout)] == [sid]
