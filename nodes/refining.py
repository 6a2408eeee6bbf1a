"""refining: decide CONTINUE / REPLAN / FINISH and keep the loop's guards."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graph.context import AgentContext, loop_runtime
from graph.state import RouteInput, TaskExecutionState
from nodes._util import last_ai

# finish_reason values a run can end with (the CLI and the runner report them as they are).
COMPLETED = "completed"
MAX_ITERATIONS = "max_iterations"
TOO_MANY_FAILURES = "too_many_failures"
CONTEXT_EXHAUSTED = "context_exhausted"
REJECTED = "rejected"

# loop_signal of a step that goes on to the next model call.
CONTINUE = "CONTINUE"


def decide(state: TaskExecutionState, settings: Any) -> dict[str, Any]:
    """The pure decision: the state update of one refining step."""
    loop = settings.loop
    iteration = int(state.get("iteration_count") or 0) + 1
    result = state.get("last_iteration_result") or {}
    update: dict[str, Any] = {"iteration_count": iteration}
    if state.get("loop_signal") == "REPLAN":
        # memory could not make the context fit any more: a fresh plan is the last resort.
        if int(state.get("replan_count") or 0) >= loop.max_replans:
            return {
                **update,
                "loop_signal": "FINISH",
                "finish_reason": CONTEXT_EXHAUSTED,
                "error": state.get("error") or "context window exhausted after compressions and replans",
            }
        return {**update, "loop_signal": "REPLAN", "replan_count": int(state.get("replan_count") or 0) + 1}
    ai = last_ai(state)
    if ai is not None and not ai.tool_calls and not ai.invalid_tool_calls:
        return {**update, "loop_signal": "FINISH", "finish_reason": COMPLETED, "consecutive_failures": 0, "error": None}
    failures = int(state.get("consecutive_failures") or 0)
    failures = failures + 1 if result.get("failures") else 0
    update["consecutive_failures"] = failures
    if failures >= loop.max_consecutive_failures:
        replans = int(state.get("replan_count") or 0)
        if replans >= loop.max_replans:
            return {
                **update,
                "loop_signal": "FINISH",
                "finish_reason": TOO_MANY_FAILURES,
                "error": f"{failures} consecutive failing iterations after {replans} replans",
            }
        return {
            **update,
            "loop_signal": "REPLAN",
            "replan_count": replans + 1,
            "consecutive_failures": 0,
            "error": f"{failures} consecutive failing iterations",
        }
    if iteration >= loop.max_iterations:
        return {
            **update,
            "loop_signal": "FINISH",
            "finish_reason": MAX_ITERATIONS,
            "error": f"stopped after max_iterations={loop.max_iterations}",
        }
    return {**update, "loop_signal": CONTINUE}


def refining_node(state: TaskExecutionState, config: RunnableConfig, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Apply `decide` and record it."""
    rt = loop_runtime(runtime, state, config)
    update = decide(state, rt.settings)
    if update.get("loop_signal") == "FINISH":
        update["execution_history_text"] = [f"finished: {update.get('finish_reason')}"]
        todo_update = rt.todo_update({**state, **update})
        if todo_update:
            update.update(todo_update)
    elif update.get("loop_signal") == "REPLAN":
        update["execution_history_text"] = [f"replanning ({update.get('error') or state.get('error')})"]
    return update


def route_after_refining(state: RouteInput) -> str:
    """reasoning to continue (it compresses first when due), planning to replan, END to finish."""
    signal = state.get("loop_signal")
    if signal == "FINISH":
        return "__end__"
    if signal == "REPLAN":
        return "planning"
    return "reasoning"
