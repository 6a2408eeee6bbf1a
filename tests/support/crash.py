"""Crash-drill helpers: run `agentrt` in real subprocesses, crash them, resume, compare final states.

Every run goes through `python -m agent.cli` in a child process with its own environment (the
counter file of `tests.support.drill_tools`, optionally `AGENTRT_CRASH_AT`), so a crash is a real
`os._exit(137)` or SIGKILL of a whole interpreter, never an exception caught in the test.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.runners import ROOT
from tests.support.shell_env import environ_copy

DRILL_SCRIPT = "builtin:scripts/drill.yaml"
DRILL_TOOLS: dict[str, Any] = {
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


def make_drill_config(tmp_path: Path, name: str = "config.yaml", **sections: Any) -> Path:
    """A drill config `tmp_path/name` on `tmp_path/agentrt`: configs/default.yaml with the drill
    script and tools, and `sections` merged in (a dict updates a section, anything else replaces it)."""
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data["persistence"]["base_dir"] = str(tmp_path / "agentrt")
    data["model"]["script"] = DRILL_SCRIPT
    data["tools"] = json.loads(json.dumps(DRILL_TOOLS))
    data["datasets"] = []  # the drill task needs none
    data["skills_dir"] = None  # the demo's skill allows dataset tools the drill has not
    for section, values in sections.items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def child_env(counter: Path, crash_at: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a drill child: the counter file, and the crash spec when given."""
    env = {k: v for k, v in environ_copy().items() if not k.startswith("AGENTRT_")}
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
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
        check=False,
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


def resume_until_done(run: Any, config: Path, session: str, env: dict[str, str], limit: int = 10) -> tuple[Any, int]:
    """`agentrt resume` (through `run`: `run_cli` or `Zygote.run`) until it exits without
    crashing; returns the last outcome and how many resumes it took."""
    for n in range(1, limit + 1):
        proc = run(["resume", session, "--config", str(config), "--json"], env)
        if proc.code != SIGKILL_CODE:
            return proc, n
    raise AssertionError(f"session {session} still crashing after {limit} resumes")


def counter_lines(counter: Path) -> list[str]:
    """The labels the unsafe tool really appended (one line per execution)."""
    return counter.read_text(encoding="utf-8").splitlines() if counter.exists() else []


def read_state(config: Path, session: str) -> dict[str, Any]:
    """The session's final graph state (the fields a drill compares), normalized; read-only."""
    from agent.runner import AgentRunner
    from checkpointing.messages import messages_to_dtos

    state = AgentRunner.from_config(config).state(session)
    keys = (
        "tool_result_store",
        "task_todo_list",
        "iteration_count",
        "model_call_count",
        "finish_reason",
        "execution_history_text",
    )
    view = {k: state.get(k) for k in keys}
    # Compared as the canonical DTOs (the messages' on-disk form): plain JSON, every field visible.
    view["messages"] = messages_to_dtos(list(state.get("messages") or []))
    return normalize_state(json.loads(json.dumps(view, default=str)))


def session_path(config: Path, session: str, tenant: str = "default") -> Path:
    """The session directory of a drill config."""
    from checkpointing.layout import session_dir

    base = yaml.safe_load(config.read_text())["persistence"]["base_dir"]
    return session_dir(base, tenant, session)


RoomFile = tuple[str, bytes | str | None]
"""(`ls -l` mode string, content): a file's bytes, a symlink's target, None for a folder."""


def room_files(room: Path) -> dict[str, RoomFile]:
    """Everything in a sandbox room, byte for byte: {relative path: (mode, content)}, folders,
    symlinks and temp files included (a leftover temp file is a difference too)."""
    out: dict[str, RoomFile] = {}
    for path in sorted(room.rglob("*")) if room.exists() else []:
        st = path.lstat()
        content: bytes | str | None = None
        if stat.S_ISREG(st.st_mode):
            content = path.read_bytes()
        elif stat.S_ISLNK(st.st_mode):
            content = os.readlink(path)
        out[path.relative_to(room).as_posix()] = (stat.filemode(st.st_mode), content)
    return out


def room_diff(actual: dict[str, RoomFile], expected: dict[str, RoomFile]) -> str:
    """What differs between two `room_files` views, one line a path (for assertion messages)."""
    lines = []
    for rel in sorted(set(actual) | set(expected)):
        got, want = actual.get(rel), expected.get(rel)
        if got != want:
            lines.append(f"{rel}: {'missing' if got is None else 'extra' if want is None else 'differs'}")
    return "; ".join(lines)


def unfinished_unsafe_calls(session_dir: Path) -> dict[str, str]:
    """{tool_call_id: tool_name} of unsafe calls whose journal INTENT has no end (a torn tail is
    ignored, as the reader does); read without touching the file."""
    from checkpointing.layout import journal_file
    from checkpointing.records import read_records

    intents: dict[str, dict[str, Any]] = {}
    ended: set[str] = set()
    for rec in read_records(journal_file(session_dir)):
        if rec["kind"] == "intent":
            intents[rec["tool_call_id"]] = rec
        else:
            ended.add(rec["tool_call_id"])
    return {cid: r["tool_name"] for cid, r in intents.items() if cid not in ended and r["effect"] == "unsafe"}


def normalize_state(state: dict[str, Any]) -> dict[str, Any]:
    """Drop what legitimately differs between two equal runs: timestamps, run ids, and the fresh
    random ids of the system/user messages a turn starts with (model and tool ids are scripted)."""
    out: dict[str, Any] = _strip(state)
    for msg in out.get("messages") or []:
        if msg.get("role") in ("system", "user"):
            msg.pop("id", None)
    return out


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("ts", "created_at", "run_id", "timestamp")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def result_view(result: dict[str, Any]) -> dict[str, Any]:
    """The `--json` result without the fields that differ between equal runs."""
    return {k: v for k, v in result.items() if k not in VOLATILE_RESULT_KEYS}


UNKNOWN_PREFIX = "Outcome unknown: the tool {name} (call {call_id})"


def expected_after_unknown(
    reference: dict[str, Any], actual: dict[str, Any], unknown: dict[str, str], bumped: list[str]
) -> dict[str, Any]:
    """The reference state as it must look when the calls in `unknown` ended as "outcome unknown".

    Exactly these differences are allowed: each such call's tool message is the "outcome unknown"
    error (its text taken from `actual` after checking its prefix), it has no tool_result_store
    entry, its history line says so, and every read-only `peek` reports what the counter really
    holds (`bumped`): a bump that never ran is absent.
    """
    exp: dict[str, Any] = json.loads(json.dumps(reference))
    texts: dict[str, str] = {}
    for msg in actual["messages"]:
        cid = msg.get("tool_call_id")
        if cid in unknown:
            prefix = UNKNOWN_PREFIX.format(name=unknown[cid], call_id=cid)
            assert str(msg["content"]).startswith(prefix) and "NOT run again" in msg["content"], msg
            texts[cid] = msg["content"]
    assert set(texts) == set(unknown), f"no outcome-unknown message for {set(unknown) - set(texts)}"
    peeks: dict[str, str] = {}
    for msg in exp["messages"]:
        for call in msg.get("tool_calls") or []:
            if call["name"] == "peek":
                label = call["args"]["label"]
                peeks[call["id"]] = f"{label}: {'present' if label in bumped else 'absent'}"
    for msg in exp["messages"]:
        cid = msg.get("tool_call_id")
        if cid in texts:
            msg["content"], msg["status"] = texts[cid], "error"
        elif cid in peeks:
            msg["content"] = peeks[cid]
    store = []
    for entry in exp["tool_result_store"]:
        cid = entry["tool_call_id"]
        if cid in texts:
            continue
        if cid in peeks:
            entry.update(content=peeks[cid], preview=peeks[cid], size=len(peeks[cid]))
        store.append(entry)
    exp["tool_result_store"] = store
    history = []
    for line in exp["execution_history_text"]:
        for cid, text in {**texts, **peeks}.items():
            name = unknown.get(cid, "peek")
            if line.startswith(f"tool {name}({cid}) -> "):
                status = "error" if cid in texts else "success"
                line = f"tool {name}({cid}) -> {status}: {text[:160]}"
        history.append(line)
    exp["execution_history_text"] = history
    return exp
