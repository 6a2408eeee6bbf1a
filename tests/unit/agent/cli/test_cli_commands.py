"""The session commands of `agentrt`: sessions, show, fork, end, pause, tool-result, with --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from tests.support.runners import make_config

SCRIPT = [
    {"content": '{"plan": "p", "todos": ["x"]}'},
    {"tool_calls": [{"name": "write_file", "args": {"path": "a.txt", "content": "ü" * 3000}}]},
    {"tool_calls": [{"name": "read_file", "args": {"path": "a.txt"}}]},
    {"content": "done"},
]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 0) -> object:
    assert main(argv) == code
    return json.loads(capsys.readouterr().out)


def test_session_commands_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """run -> sessions -> show -> tool-result -> fork -> pause -> end, each giving what it says."""
    cfg = str(make_config(tmp_path, SCRIPT))
    result = _json(capsys, ["run", "--config", cfg, "--json", "write", "a", "file"])
    assert isinstance(result, dict) and result["status"] == "COMPLETED"
    sid = result["session_id"]
    assert {"session_id", "answer", "status", "finish_reason"} <= set(result)

    listed = _json(capsys, ["sessions", "--config", cfg, "--json"])
    assert [s["session_id"] for s in listed] == [sid]  # type: ignore[union-attr,index]

    shown = _json(capsys, ["show", sid, "--config", cfg, "--json", "--last", "100"])
    assert isinstance(shown, dict) and shown["header"]["session_id"] == sid
    types = [e["type"] for e in shown["entries"]]
    assert types[0] == "run_start" and types[-1] == "run_end" and "tool_result" in types

    piece = _json(capsys, ["tool-result", sid, "call_3_1", "--config", cfg, "--json", "--offset", "10", "--limit", "5"])
    assert isinstance(piece, dict) and piece["text"] == "ü" * 5 and piece["total"] == 3000

    entry = next(e["id"] for e in shown["entries"] if e["type"] == "assistant_message")
    forked = _json(capsys, ["fork", sid, "--from", entry, "--config", cfg, "--json"])
    assert isinstance(forked, dict) and forked["branch_id"] != "main" and forked["checkpoint_id"]

    paused = _json(capsys, ["pause", sid, "--config", cfg, "--json"])
    assert isinstance(paused, dict) and paused["status"] == "PAUSED"
    assert main(["run", "--config", cfg, "--session", sid, "again"]) == 4  # conflict: the session is PAUSED
    assert "PAUSED" in capsys.readouterr().err

    ended = _json(capsys, ["end", sid, "--config", cfg, "--json"])
    assert isinstance(ended, dict) and ended["status"] == "ENDED"


def test_other_tenant_cannot_see_the_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """show with another --tenant reads as not found."""
    cfg = str(make_config(tmp_path, SCRIPT))
    sid = _json(capsys, ["run", "--config", cfg, "--json", "x"])["session_id"]  # type: ignore[index]
    assert main(["show", sid, "--config", cfg, "--tenant", "other"]) == 3  # not found
    assert "not found" in capsys.readouterr().err


def test_unknown_tool_result_id_is_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown call id says how to find the right one."""
    cfg = str(make_config(tmp_path, SCRIPT))
    sid = _json(capsys, ["run", "--config", cfg, "--json", "x"])["session_id"]  # type: ignore[index]
    assert main(["tool-result", sid, "nope", "--config", cfg]) == 3  # not found
    assert "nope" in capsys.readouterr().err
