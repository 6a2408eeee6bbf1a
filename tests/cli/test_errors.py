"""Each error class through the console script: its documented exit status and exactly one line."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.console import ROOT, Ran, agentrt


def _paused_session(work: Path) -> str:
    ran = agentrt("run", "--json", "Summarise the sales", cwd=work)
    assert ran.code == 0, ran.both
    result = json.loads(ran.out)
    assert result["status"] == "PAUSED"
    return str(result["session_id"])


def _config(work: Path, **changes: object) -> Path:
    """configs/default.yaml copied into `work` with `changes` (dotted keys)."""
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    for dotted, value in changes.items():
        section, key = dotted.split(".", 1)
        data.setdefault(section, {})[key] = value
    path = work / "changed.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _fails(ran: Ran, code: int, *words: str) -> str:
    assert ran.code == code, ran.both
    line = ran.error_line()
    for w in words:
        assert w in line, line
    return line


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    """A misspelled config key, a missing config file, an id that cannot be a path: 2, one line."""
    bad = _config(tmp_path, **{"loop.max_iteratons": 3})
    _fails(agentrt("run", "--config", str(bad), "hi", cwd=tmp_path), 2, "loop.max_iteratons", "unknown key")
    _fails(agentrt("run", "--config", "missing.yaml", "hi", cwd=tmp_path), 2, "config file not found")
    _fails(agentrt("show", "../etc", cwd=tmp_path), 2, "session id")
    _fails(agentrt("doctor", "bad id!", cwd=tmp_path), 2, "session id", "agentrt sessions")
    _fails(agentrt("run", "   ", cwd=tmp_path), 2, "empty input")


def test_not_found_exits_3(tmp_path: Path) -> None:
    """An unknown session for show, resume and doctor; another tenant's session: 3, one line."""
    _fails(agentrt("show", "s-nothere", cwd=tmp_path), 3, "s-nothere")
    _fails(agentrt("resume", "s-nothere", cwd=tmp_path), 3, "s-nothere")
    _fails(agentrt("doctor", "s-nothere", cwd=tmp_path), 3, "s-nothere")
    sid = _paused_session(tmp_path)
    _fails(agentrt("show", sid, "--tenant", "other", cwd=tmp_path), 3, "not found")
    _fails(agentrt("tool-result", sid, "call_nope", cwd=tmp_path), 3, "call_nope")


def test_tool_result_out_of_bounds_is_bad_input_exit_2(tmp_path: Path) -> None:
    """A page past the tool-result limits is the caller's input, not a failed run: 2, naming the option."""
    sid = _paused_session(tmp_path)
    _fails(agentrt("tool-result", sid, "call_3_1", "--limit", "100000", cwd=tmp_path), 2, "--limit must")
    _fails(agentrt("tool-result", sid, "call_3_1", "--offset", "99999999", cwd=tmp_path), 2, "past the end")


def test_conflict_exits_4(tmp_path: Path) -> None:
    """A new turn on a session that waits for an approval, or after `pause`: 4, one line."""
    sid = _paused_session(tmp_path)
    _fails(agentrt("run", "--session", sid, "again", cwd=tmp_path), 4, sid)
    _fails(agentrt("resume", sid, cwd=tmp_path), 4, "--approve")


def test_recovery_blocked_exits_5(tmp_path: Path) -> None:
    """Resuming with a changed toolset: 5, one line naming the step; nothing is re-pinned."""
    sid = _paused_session(tmp_path)
    tools = [t for t in yaml.safe_load((ROOT / "configs/default.yaml").read_text())["tools"]["builtins"]]
    changed = _config(tmp_path, **{"tools.builtins": [t for t in tools if t != "edit_file"]})
    _fails(agentrt("resume", sid, "--config", str(changed), "--approve", cwd=tmp_path), 5, "RECOVERY_BLOCKED")
    done = agentrt("resume", sid, "--approve", "--json", cwd=tmp_path)
    assert done.code == 0 and json.loads(done.out)["status"] == "COMPLETED", done.both


def test_backend_unavailable_exits_6(tmp_path: Path) -> None:
    """A PostgreSQL that does not answer: 6, one line."""
    down = {"AGENTRT_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/test"}
    _fails(agentrt("db", "init", cwd=tmp_path, extra_env=down), 6)


def test_model_call_failed_exits_7(tmp_path: Path) -> None:
    """A model server that does not answer: 7, one line that says how to go on."""
    cfg = _config(
        tmp_path,
        **{"model.provider": "openai", "model.base_url": "http://127.0.0.1:9/v1", "model.max_retries": 0},
    )
    line = _fails(agentrt("run", "--config", str(cfg), "--quiet", "hi", cwd=tmp_path), 7, "agentrt resume")
    assert "model" in line


def test_corrupt_data_exits_8(tmp_path: Path) -> None:
    """A damaged record in the middle of events.jsonl: 8, one line naming the file; nothing rewritten."""
    sid = _paused_session(tmp_path)
    events = tmp_path / ".agentrt" / "tenants" / "default" / "sessions" / sid / "events.jsonl"
    damaged = events.read_bytes().replace(b"Summarise the sales", b"Summarize the sales", 1)
    events.write_bytes(damaged)
    _fails(agentrt("show", sid, cwd=tmp_path), 8, "events.jsonl", "corrupt")
    assert events.read_bytes() == damaged


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    """AGENTRT_DEBUG=1: the traceback is there for a developer."""
    ran = agentrt("show", "s-nothere", cwd=tmp_path, extra_env={"AGENTRT_DEBUG": "1"})
    assert ran.code != 0 and "Traceback" in ran.err
