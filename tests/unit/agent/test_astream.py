"""AgentRunner.astream yields the same typed events from asyncio code."""

from __future__ import annotations

from pathlib import Path

from agent.runner import AgentRunner
from tests.support.runners import make_config


async def test_astream_yields_events_and_final(tmp_path: Path) -> None:
    """The async stream ends with `final` and shows nodes, tools and tokens on the way."""
    script = [
        {"content": '{"plan": "p", "todos": ["x"]}'},
        {"tool_calls": [{"name": "calculator", "args": {"expression": "2*21"}}]},
        {"content": "forty two"},
    ]
    runner = AgentRunner.from_config(make_config(tmp_path, script))
    kinds = []
    final = {}
    async for ev in runner.astream("compute"):
        kinds.append(ev.kind)
        if ev.kind == "final":
            final = ev.data
    assert final["status"] == "COMPLETED" and final["answer"] == "forty two"
    assert {"node", "tool_call", "tool_result", "token", "model_call"} <= set(kinds)
