"""memory: the token-budget check and compression-tier dispatch (tiers live in agent.loop.compression)."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graph.context import AgentContext, loop_runtime
from graph.state import RouteInput, TaskExecutionState


def memory_node(state: TaskExecutionState, config: RunnableConfig, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Compress when due (or after a LENGTH finish); signal REPLAN when nothing fits any more."""
    rt = loop_runtime(runtime, state, config)
    result = state.get("last_iteration_result") or {}
    reason = "length" if result.get("finish_reason") == "length" else "budget"
    update = dict(rt.compress(state, reason=reason))
    if reason == "length":
        failures = int(state.get("consecutive_failures") or 0) + 1
        update.setdefault("consecutive_failures", failures)
        if failures >= rt.settings.loop.max_consecutive_failures:
            update["loop_signal"] = "REPLAN"
            update["error"] = f"model output truncated (finish_reason=length) {failures} times in a row"
    update.setdefault("loop_signal", "COMPRESSED")
    return update


def route_after_memory(state: RouteInput) -> str:
    """reasoning normally; refining when compression is exhausted (it replans or fails)."""
    return "refining" if state.get("loop_signal") == "REPLAN" else "reasoning"
