"""The six-node graph runs the shipped demo script end to end."""

from __future__ import annotations

from pathlib import Path

from agent.runner import AgentRunner
from tests.support.runners import make_config


def _run_demo(tmp_path: Path) -> tuple[AgentRunner, list, object]:
    runner = AgentRunner.from_config(make_config(tmp_path))
    events = list(runner.stream("please do the demo task"))
    return runner, events, events[-1]


def test_demo_completes_with_answer_and_files(tmp_path: Path) -> None:
    """The demo plans, calls tools over several iterations, writes files in the room and answers."""
    runner, _, final = _run_demo(tmp_path)
    result = final.data  # type: ignore[attr-defined]
    assert result["status"] == "COMPLETED"
    assert result["finish_reason"] == "completed"
    assert "13.5" in result["answer"]
    assert result["iterations"] == 5
    assert result["model_calls"] == 6
    room = runner.session_dir("default", result["session_id"]) / "workspace"
    assert (room / "report.md").read_text().startswith("# Sensor report")
    assert len((room / "data" / "readings.csv").read_text()) > 8192
    assert all(t["status"] == "done" for t in result["todos"])


def test_demo_node_order(tmp_path: Path) -> None:
    """Nodes run in the wired order: init, planning, then reasoning/acting/refining/memory loops."""
    _, events, _ = _run_demo(tmp_path)
    nodes = [e.data["node"] for e in events if e.kind == "node"]
    assert nodes[:5] == ["init", "planning", "reasoning", "acting", "refining"]
    assert nodes[-2:] == ["reasoning", "refining"]
    assert nodes.count("acting") == 4 and nodes.count("memory") == 4
    kinds = [e.kind for e in events]
    assert "token" in kinds and kinds.count("tool_call") == 8 and kinds.count("tool_result") == 8


def test_demo_records_usage_and_finish_reasons(tmp_path: Path) -> None:
    """Each model call's usage and finish reason reach the stream and the AI messages."""
    runner, events, final = _run_demo(tmp_path)
    calls = [e.data for e in events if e.kind == "model_call"]
    assert [c["finish_reason"] for c in calls] == ["stop"] + ["tool_calls"] * 4 + ["stop"]
    assert calls[-1]["usage"]["input_tokens"] == 4050
    state = runner.state(final.data["session_id"])  # type: ignore[attr-defined]
    ai = [m for m in state["runtime_messages"] if m["role"] == "ai"]
    assert ai[-1]["usage"]["output_tokens"] == 30


def test_large_tool_result_is_kept_whole_in_tool_result_store(tmp_path: Path) -> None:
    """The ~11 KB read_file result is recorded in tool_result_store with its full size."""
    runner, _, final = _run_demo(tmp_path)
    state = runner.state(final.data["session_id"])  # type: ignore[attr-defined]
    sizes = {e["tool_name"]: e["size"] for e in state["tool_result_store"]}
    assert sizes["read_file"] > 8192
