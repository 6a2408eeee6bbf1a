"""Crash-drill helpers: run `agentrt` in real subprocesses, crash them, resume, compare final states.

Every run goes through `python -m agent.cli` in a child process with its own environment (the
counter file of `tests.support.drill_tools`, optionally `AGENTRT_CRASH_AT`), so a crash is a real
`os._exit(137)` or SIGKILL of a whole interpreter, never an exception caught in the test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.runners import ROOT, make_config

DRILL_SCRIPT = ROOT / "configs" / "scripts" / "drill.yaml"
DRILL_TOOLS = {
    "builtins": ["list_files", "read_file", "write_file", "edit_file", "calculator", "read_tool_result", "update_todo"],
    "custom": [
        {"path": "tests.support.drill_tools:bump", "effect": "unsafe"},
        {"path": "tests.support.drill_tools:peek", "effect": "read_only"},
    ],
}
DRILL_TEXT = "run the drill"
SIGKILL_CODE = 137  # os._exit(137) of a crash point; a real SIGKILL shows as -9 from Popen
# Results of a run that differ between two equal runs (fresh ids), left out of comparisons.
VOLATILE_RESULT_KEYS = frozenset({"run_id", "note"})


@dataclass
class Proc:
    """A finished child process."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        """The `--json` object the command printed."""
        out: dict[str, Any] = json.loads(self.stdout)
        return out


def drill_config(tmp_path: Path, name: str = "config.yaml", **sections: Any) -> Path:
    """A drill config on `tmp_path/agentrt` (drill script, drill tools, section overrides)."""
    tools = sections.pop("tools", DRILL_TOOLS)
    path = make_config(tmp_path, None, tools=tools, **sections)
    data = path.read_text()
    target = tmp_path / name
    if target != path:
        target.write_text(data)
    return target


def _script_path(config: Path) -> None:
    """Point a config made by `make_config` at the drill script (make_config defaults to demo)."""
    import yaml

    data = yaml.safe_load(config.read_text())
    data["model"]["script"] = str(DRILL_SCRIPT)
    config.write_text(yaml.safe_dump(data, sort_keys=False))


def make_drill_config(tmp_path: Path, name: str = "config.yaml", **sections: Any) -> Path:
    """`drill_config` with the drill script."""
    path = drill_config(tmp_path, name, **sections)
    _script_path(path)
    return path


def child_env(counter: Path, crash_at: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a drill child: the counter file, and the crash spec when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    env["AGENTRT_DRILL_COUNTER"] = str(counter)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if crash_at:
        env["AGENTRT_CRASH_AT"] = crash_at
    env.update(extra)
    return env


def cli_argv(*args: str) -> list[str]:
    """argv of `agentrt ARGS` through the current interpreter."""
    return [sys.executable, "-m", "agent.cli", *args]


def run_cli(args: list[str], env: dict[str, str], timeout: float = 60.0, cwd: Path | None = None) -> Proc:
    """Run `agentrt ARGS` to its end (or its crash) and collect its output."""
    p = subprocess.run(
        cli_argv(*args), env=env, capture_output=True, text=True, timeout=timeout, cwd=str(cwd or ROOT), check=False
    )
    return Proc(p.returncode, p.stdout, p.stderr)


def run_python(code: str, args: list[str], env: dict[str, str], timeout: float = 60.0) -> Proc:
    """Run `python -c CODE ARGS...` (for resumes under a changed graph or schema)."""
    p = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=timeout,
        cwd=str(ROOT), check=False,
    )
    return Proc(p.returncode, p.stdout, p.stderr)


def start_cli(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """Start `agentrt ARGS` without waiting."""
    return subprocess.Popen(
        cli_argv(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT)
    )


def kill_after(proc: subprocess.Popen[str], delay_s: float) -> bool:
    """SIGKILL `proc` after `delay_s` unless it ended first; True when it was killed."""
    try:
        proc.wait(timeout=delay_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        return True
    proc.communicate()
    return False


def wait_for(predicate: Any, timeout_s: float = 30.0, poll_s: float = 0.02) -> bool:
    """Poll `predicate()` until true (a synchronisation point, not an assertion on time)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(poll_s)
    return bool(predicate())


def resume_until_done(config: Path, session: str, env: dict[str, str], limit: int = 10) -> tuple[Proc, int]:
    """`agentrt resume` until it exits without crashing; returns the last process and the count."""
    for n in range(1, limit + 1):
        proc = run_cli(["resume", session, "--config", str(config), "--json"], env)
        if proc.code != SIGKILL_CODE:
            return proc, n
    raise AssertionError(f"session {session} still crashing after {limit} resumes")


def counter_lines(counter: Path) -> list[str]:
    """The labels the unsafe tool really appended (one line per execution)."""
    return counter.read_text(encoding="utf-8").splitlines() if counter.exists() else []


def read_state(config: Path, session: str, env: dict[str, str]) -> dict[str, Any]:
    """The session's final graph state, normalized (see `normalize_state`), read in a child."""
    code = (
        "import json, sys\n"
        "from agent.runner import AgentRunner\n"
        "r = AgentRunner.from_config(sys.argv[1])\n"
        "st = r.state(sys.argv[2])\n"
        "from checkpointing.messages import message_to_dto\n"
        "out = {k: st.get(k) for k in ('runtime_messages', 'tool_result_store', 'task_todo_list',"
        " 'iteration_count', 'model_call_count', 'finish_reason', 'execution_history_text')}\n"
        "print(json.dumps(out, default=str))\n"
    )
    proc = run_python(code, [str(config), session], env)
    assert proc.code == 0, proc.stderr
    return normalize_state(json.loads(proc.stdout))


def normalize_state(state: dict[str, Any]) -> dict[str, Any]:
    """Drop what legitimately differs between two equal runs: timestamps and run ids."""
    return _strip(state)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("ts", "created_at", "run_id", "timestamp")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def result_view(result: dict[str, Any]) -> dict[str, Any]:
    """The `--json` result without the fields that differ between equal runs."""
    return {k: v for k, v in result.items() if k not in VOLATILE_RESULT_KEYS}
