"""RECOVERY_BLOCKED drills: change what a crashed run depends on, for real, then resume it.

Each case crashes the drill run mid-way, then resumes under a really changed runtime: another
config (tools added/removed, a tool's schema, permissions, system prompt, compression, model
name), a process whose graph has an extra node or whose state schema version was bumped, a byte
flipped inside checkpoints.jsonl, a branch that vanished from the event log. The resume must
refuse with the step and reason, log a `recovery_blocked` event, mark the run RECOVERY_BLOCKED,
and leave every file as it was (apart from the event log and the session record, which carry
the block, and the lease bookkeeping a resume takes first). `--accept-changes` then re-pins the
changed digests, records who and why, and the run completes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import load_settings
from agent.runner.routing import session_graph_version
from tests.support.crash import (
    DRILL_TEXT,
    DRILL_TOOLS,
    SIGKILL_CODE,
    child_env,
    make_drill_config,
    run_python,
    session_path,
)
from tests.support.hooked_celery import hooked_version
from tests.support.zygote import Zygote

SID = "blocked-1"
# Files a blocked resume may change: the block is logged in the event log and the session record
# (JSON and its SQL projection); the lease and fence files are written when the lease is taken.
MAY_CHANGE = ("events.jsonl", "session.json", "agentrt.db", "sessions.index.sqlite", "lease.", "fence.json")

# A resume in a process whose graph has one more node (added before the runner is built).
GRAPH_HOOK = """
import sys
import graph.build as gb
_orig = gb.build_state_graph
def _patched(*args, **kwargs):
    g = _orig(*args, **kwargs)
    g.add_node("audit", lambda state: {})
    return g
gb.build_state_graph = _patched
gb.GRAPH_VERSION = gb.compute_graph_version(gb.build_graph())
from agent.cli import main
sys.exit(main(sys.argv[1:]))
"""
# A resume in a process whose state schema version was bumped (before the runtime is imported).
SCHEMA_HOOK = """
import sys
import graph.schema  # where the version lives; graph.state and agent.runner.recovery import it from here
graph.schema.SCHEMA_VERSION = graph.schema.SCHEMA_VERSION + 1
from agent.cli import main
sys.exit(main(sys.argv[1:]))
"""


BUILTINS: list[str] = list(DRILL_TOOLS["builtins"])


def _tools(**change: Any) -> dict[str, Any]:
    tools: dict[str, Any] = json.loads(json.dumps(DRILL_TOOLS))
    if "builtins" in change:
        tools["builtins"] = change["builtins"]
    if "peek" in change:
        tools["custom"][1] = change["peek"]
    return tools


# (case id, config sections for the resume, python hook, step, words of the reason)
PIN_CASES = [
    ("tool_added", {"tools": _tools(builtins=[*BUILTINS, "delete_file"])}, None, "validate_surface", "toolset changed"),
    (
        "tool_removed",
        {"tools": _tools(builtins=[b for b in BUILTINS if b != "calculator"])},
        None,
        "validate_surface",
        "toolset changed",
    ),
    (
        "tool_schema",
        {"tools": _tools(peek={"path": "tests.support.drill_tools:peek_v2", "name": "peek", "effect": "read_only"})},
        None,
        "validate_surface",
        "toolset changed",
    ),
    (
        "permissions",
        {
            "tools": _tools(
                peek={"path": "tests.support.drill_tools:peek", "effect": "read_only", "permissions": ["net"]}
            )
        },
        None,
        "validate_surface",
        "permissions changed",
    ),
    (
        "system_prompt",
        {"loop": {"system_prompt": "You are a different agent."}},
        None,
        "validate_surface",
        "message projection config changed",
    ),
    ("compression", {"compression": {"preview_chars": 99}}, None, "validate_surface", "message projection"),
    ("model_name", {"model": {"name": "scripted-other"}}, None, "validate_surface", "runtime surface changed"),
    ("graph", {}, GRAPH_HOOK, "validate_graph", "graph version changed"),
    ("schema", {}, SCHEMA_HOOK, "validate_schema", "state schema version changed"),
]


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """Fork server for the crash and the config-only resumes."""
    with Zygote(tmp_path_factory.mktemp("zygote")) as z:
        yield z


def _crash(z: Zygote, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    cfg = make_drill_config(tmp_path)
    env = child_env(tmp_path / "counter")
    out = z.run(
        ["run", "--config", str(cfg), "--new-session", SID, "--json", DRILL_TEXT],
        {**env, "AGENTRT_CRASH_AT": "after_checkpoint_put:10"},
    )
    assert out.code == SIGKILL_CODE, out.stderr
    return cfg, env


def _files(base: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file() and not any(p.name.startswith(m) for m in MAY_CHANGE)
    }


def _resume(z: Zygote, cfg: Path, env: dict[str, str], hook: str | None, *extra: str) -> Any:
    argv = ["resume", SID, "--config", str(cfg), *extra]
    return run_python(hook, argv, env) if hook else z.run(argv, env)


def _events(cfg: Path) -> list[dict[str, Any]]:
    from checkpointing.records import decode_record

    lines = (session_path(cfg, SID) / "events.jsonl").read_bytes().splitlines()
    return [decode_record(line) for line in lines if line]


def _session(cfg: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((session_path(cfg, SID) / "session.json").read_text())
    return doc


def _assert_blocked(out: Any, cfg: Path, before: dict[str, bytes], step: str, words: str) -> None:
    assert out.code == 5, out.stderr  # RECOVERY_BLOCKED
    text = " ".join(out.stderr.split())
    assert f"RECOVERY_BLOCKED at {step}: " in text and words in text, out.stderr
    blocked = [e for e in _events(cfg) if e.get("type") == "recovery_blocked"]
    assert blocked and blocked[-1]["payload"]["step"] == step, blocked
    assert "RECOVERY_BLOCKED" in json.dumps(_session(cfg))
    assert _files(cfg.parent / "agentrt") == before, "a blocked resume changed state on disk"


@pytest.mark.parametrize(("case", "sections", "hook", "step", "words"), PIN_CASES, ids=[c[0] for c in PIN_CASES])
def test_changed_runtime_blocks_then_accept_changes_continues(
    tmp_path: Path, zygote: Zygote, case: str, sections: dict[str, Any], hook: str | None, step: str, words: str
) -> None:
    """A real change between crash and resume blocks recovery untouched; --accept-changes re-pins and finishes."""
    cfg, env = _crash(zygote, tmp_path)
    changed = make_drill_config(tmp_path, "changed.yaml", **sections) if sections else cfg
    before = _files(tmp_path / "agentrt")
    out = _resume(zygote, changed, env, hook)
    _assert_blocked(out, cfg, before, step, words)
    again = _resume(zygote, changed, env, hook)  # blocked again, the same way: nothing was re-pinned
    _assert_blocked(again, cfg, before, step, words)

    done = _resume(zygote, changed, env, hook, "--json", "--accept-changes", "--reason", "drill")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "COMPLETED"
    overrides = [e for e in _events(cfg) if e.get("type") == "recovery_override"]
    assert len(overrides) == 1
    payload = overrides[0]["payload"]
    # the CLI has no --operator: the operator is --user, i.e. the session's own user ("local")
    assert payload["operator"] == "local" and payload["reason"] == "drill" and payload["accepted"]
    if case == "graph":  # the run went on under the new graph: the session's next turns go to its workers
        settings = load_settings(cfg)
        assert session_graph_version(settings, settings.session.tenant_id, SID) == hooked_version()


def test_corrupt_checkpoint_blocks_and_accepting_changes_does_not_help(tmp_path: Path, zygote: Zygote) -> None:
    """A byte flipped inside checkpoints.jsonl blocks recovery naming the file; no override skips it."""
    cfg, env = _crash(zygote, tmp_path)
    (cp_file,) = session_path(cfg, SID).glob("runs/*/checkpoints.jsonl")
    data = bytearray(cp_file.read_bytes())
    lines = data.split(b"\n")
    middle = sum(len(x) + 1 for x in lines[: len(lines) // 2]) + 20
    data[middle] = ord("#") if data[middle] != ord("#") else ord("%")
    cp_file.write_bytes(bytes(data))
    before = _files(tmp_path / "agentrt")
    out = _resume(zygote, cfg, env, None)
    # format 2: the saver verifies the whole run file when it first opens it, so the damage blocks the
    # first step that reads the checkpoint, wherever the flipped record sits
    _assert_blocked(out, cfg, before, "validate_identity", "corrupt or missing data")
    assert f"{cp_file.name}:{len(lines) // 2 + 1}: corrupt record" in "".join(out.stderr.splitlines())
    forced = _resume(zygote, cfg, env, None, "--accept-changes")
    _assert_blocked(forced, cfg, before, "validate_identity", "corrupt or missing data")


def test_other_tenant_cannot_see_the_session(tmp_path: Path, zygote: Zygote) -> None:
    """Resuming under another tenant finds no such session, and changes nothing of the real one."""
    cfg, env = _crash(zygote, tmp_path)
    before = _files(tmp_path / "agentrt")
    events_before = (session_path(cfg, SID) / "events.jsonl").read_bytes()
    out = zygote.run(["resume", SID, "--config", str(cfg), "--tenant", "intruder"], env)
    assert out.code == 3
    assert "not found" in out.stderr
    assert _files(tmp_path / "agentrt") == before
    assert (session_path(cfg, SID) / "events.jsonl").read_bytes() == events_before


def test_missing_branch_blocks(tmp_path: Path, zygote: Zygote) -> None:
    """A run on a branch the event log lost (log restored from a pre-fork backup) is blocked, not re-rooted."""
    cfg, env = _crash(zygote, tmp_path)
    done = zygote.run(["resume", SID, "--config", str(cfg), "--json"], env)
    assert done.code == 0, done.stderr
    log = session_path(cfg, SID) / "events.jsonl"
    backup = log.read_bytes()
    shown = zygote.run(["show", SID, "--config", str(cfg), "--json", "--last", "80"], env).json()
    entry = next(e for e in shown["entries"] if e["type"] == "node_end" and '"next": ["acting"]' in e["summary"])
    forked = zygote.run(["fork", SID, "--config", str(cfg), "--from", entry["id"], "--json"], env)
    assert forked.code == 0, forked.stderr
    branch = forked.json()["branch_id"]
    crashed = zygote.run(
        ["run", "--config", str(cfg), "--session", SID, "--json", "again"],
        {**env, "AGENTRT_CRASH_AT": "after_checkpoint_put:3"},
    )
    assert crashed.code == SIGKILL_CODE
    log.write_bytes(backup)  # the operator restores the event log from before the fork
    before = _files(tmp_path / "agentrt")
    out = _resume(zygote, cfg, env, None)
    _assert_blocked(out, cfg, before, "validate_branch", "branch missing from the event log")
    assert branch in "".join(out.stderr.splitlines())
    forced = _resume(zygote, cfg, env, None, "--accept-changes")
    _assert_blocked(forced, cfg, before, "validate_branch", "branch missing")
