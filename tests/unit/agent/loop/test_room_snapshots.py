"""The room is scanned after a tool step only when a tool may have changed it.

A turn of read-only calls on an empty room records one room snapshot, not one per step, and a
write after them still reaches the checkpointed manifest.
"""

from __future__ import annotations

from pathlib import Path

from agent.runner import AgentRunner
from tests.support.runners import make_config

CALC = {"tool_calls": [{"name": "calculator", "args": {"expression": "1+1"}}]}
WRITE = {"tool_calls": [{"name": "write_file", "args": {"path": "notes.txt", "content": "two"}}]}


def _snapshots(runner: AgentRunner, session_id: str) -> list[dict[str, object]]:
    log = runner.manager.jsonl.event_log("default", session_id)
    return [e.payload for e in log.entries({"sandbox"}) if e.payload.get("kind") == "snapshot"]


def test_read_only_steps_on_an_empty_room_record_one_snapshot(tmp_path: Path) -> None:
    """Five calculator steps: one snapshot entry in the event log, and no manifest in the state."""
    cfg = make_config(tmp_path, [*[CALC] * 5, {"content": "2"}], loop={"planning": "never"})
    runner = AgentRunner.from_config(cfg)
    result = runner.run("add", new_session_id="s-calc")
    assert result.status == "COMPLETED" and result.tool_calls == 5
    assert [p["files"] for p in _snapshots(runner, "s-calc")] == [0]
    assert runner.state("s-calc").get("sandbox_manifest") is None


def test_a_write_after_read_only_steps_reaches_the_manifest(tmp_path: Path) -> None:
    """Reads, then a write, then a read: the file is in the checkpointed manifest and the room is
    scanned again for the write only."""
    cfg = make_config(tmp_path, [CALC, CALC, WRITE, CALC, {"content": "done"}], loop={"planning": "never"})
    runner = AgentRunner.from_config(cfg)
    result = runner.run("write", new_session_id="s-write")
    assert result.status == "COMPLETED" and result.tool_calls == 4
    assert sorted(runner.state("s-write")["sandbox_manifest"]) == ["notes.txt"]
    files = [p["files"] for p in _snapshots(runner, "s-write")]
    assert files[0] == 0 and files[1:] and set(files[1:]) == {1}  # no scan for the second read
