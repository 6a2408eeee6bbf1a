"""Refining guards: max iterations, consecutive failures -> replan -> failed, each with its reason."""

from __future__ import annotations

from pathlib import Path

from agent.runner import AgentRunner
from tests.support.runners import make_config

PLAN = {"content": '{"plan": "p", "todos": ["a"]}'}
BAD = {"tool_calls": [{"name": "no_such_tool", "args": {}}]}
CALC = {"tool_calls": [{"name": "calculator", "args": {"expression": "1+1"}}]}


def test_max_iterations_stops_with_its_reason(tmp_path: Path) -> None:
    """A model that never stops calling tools is stopped at loop.max_iterations."""
    runner = AgentRunner.from_config(make_config(tmp_path, [PLAN, CALC, CALC, CALC], loop={"max_iterations": 3}))
    result = runner.run("loop forever")
    assert result.status == "FAILED"
    assert result.finish_reason == "max_iterations"
    assert result.iterations == 3
    assert "max_iterations=3" in (result.error or "")


def test_failures_replan_then_fail(tmp_path: Path) -> None:
    """Two failing iterations trigger a replan; two more after the last replan end the run FAILED."""
    script = [PLAN, BAD, BAD, PLAN, BAD, BAD]
    runner = AgentRunner.from_config(
        make_config(tmp_path, script, loop={"max_consecutive_failures": 2, "max_replans": 1})
    )
    events = list(runner.stream("use a tool that does not exist"))
    nodes = [e.data["node"] for e in events if e.kind == "node"]
    assert nodes.count("planning") == 2
    replan_at = [i for i, node in enumerate(nodes) if node == "planning"][1]
    assert nodes[replan_at - 2 : replan_at] == ["acting", "refining"]  # refining records the replan
    result = events[-1].data
    assert result["status"] == "FAILED"
    assert result["finish_reason"] == "too_many_failures"
    assert "after 1 replans" in result["error"]
    state = runner.state(result["session_id"])
    assert state["replan_count"] == 1
    tool_msgs = [m for m in state["messages"] if m.type == "tool"]
    assert all(m.status == "error" and "unknown tool" in m.content for m in tool_msgs)


def test_a_success_resets_the_failure_count(tmp_path: Path) -> None:
    """Failures must be consecutive: a good iteration in between resets the counter."""
    script = [PLAN, BAD, CALC, BAD, CALC, {"content": "ok"}]
    runner = AgentRunner.from_config(make_config(tmp_path, script, loop={"max_consecutive_failures": 2}))
    result = runner.run("mixed")
    assert result.status == "COMPLETED" and result.answer == "ok"
