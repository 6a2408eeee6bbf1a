"""acting: execute the tool calls of the last AI message (through the journal), pair the results.

A step that simply continues records refining's guards in acting's own update and goes straight
back to reasoning: refining's decision is a pure function of the state, so giving it a durable
superstep of its own when it only says CONTINUE would cost one more checkpoint per tool step and
protect nothing. Any other decision (REPLAN, FINISH) goes through the refining node, which makes
the same decision on the same state and records it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from graph.context import AgentContext, loop_runtime
from graph.state import RouteInput, TaskExecutionState, normalize_decision
from nodes import _model_output as out
from nodes._util import last_ai
from nodes.refining import CONTINUE, decide


def acting_node(state: TaskExecutionState, config: RunnableConfig, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Run every tool call once; each gets exactly one paired ToolMessage."""
    rt = loop_runtime(runtime, state, config)
    ai = last_ai(state)
    calls = [dict(tc) for tc in (ai.tool_calls if ai is not None else [])]
    invalid = {"invalid_tool_calls": ai.invalid_tool_calls} if ai is not None else None
    unparsed = out.invalid_call_answers(invalid, rt.emit)  # calls whose arguments were not JSON
    if not calls and not unparsed:
        return _with_guards(state, {"last_iteration_result": {"tool_calls": 0, "failures": 0}}, rt.settings)
    decisions = ask_approvals(rt, calls)
    rejected = {cid: d.get("reason") or "rejected" for cid, d in decisions.items() if not d["approved"]}
    results = rt.execute_tool_calls(state, calls, rejected=rejected)
    tool_msgs: list[ToolMessage] = []
    store_entries: list[dict[str, Any]] = []
    history: list[str] = []
    failures = 0
    for call, res in zip(calls, results, strict=True):
        status = "error" if res["status"] != "success" else "success"
        failures += res["status"] not in ("success", "rejected")
        tool_msgs.append(
            ToolMessage(
                content=res["content"],
                tool_call_id=call["id"],
                name=call["name"],
                status=status,
                id=f"tool-{call['id']}",
            )
        )
        if res.get("store_entry"):
            store_entries.append(res["store_entry"])
        history.append(f"tool {call['name']}({call['id']}) -> {res['status']}: {str(res['content'])[:160]}")
    tool_msgs += unparsed
    failures += len(unparsed)
    history += [f"tool {m.name}({m.tool_call_id}) -> error: arguments not JSON" for m in unparsed]
    update: dict[str, Any] = {
        "messages": tool_msgs,
        "tool_call_count": int(state.get("tool_call_count") or 0) + len(tool_msgs),
        "execution_history_text": history,
        "last_iteration_result": {"tool_calls": len(calls) + len(unparsed), "failures": failures},
    }
    if store_entries:
        update["tool_result_store"] = store_entries
    if decisions:
        update["hitl_decision"] = decisions
        update["hitl_request"] = None
    update.update(rt.sandbox_update(state, calls))
    todo_update = rt.todo_update(state)
    if todo_update:
        update.update(todo_update)
    return _with_guards(state, update, rt.settings)


def _with_guards(state: TaskExecutionState, update: dict[str, Any], settings: Any) -> dict[str, Any]:
    """`update` plus refining's decision when that decision is CONTINUE (see the module doc)."""
    step = decide({**state, "last_iteration_result": update["last_iteration_result"]}, settings)
    if step.get("loop_signal") == CONTINUE:
        update.update(step)
    return update


def route_after_acting(state: RouteInput) -> str:
    """reasoning when the step continues (its guards are recorded); refining to replan or finish."""
    return "reasoning" if state.get("loop_signal") == CONTINUE else "refining"


def ask_approvals(runtime: Any, calls: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Ask a human about every call whose tool requires approval, before any tool of the message runs.

    LangGraph re-runs this node from its top on resume; `interrupt()` then returns the recorded
    answers in order, and no tool has run yet, so nothing before this point needs to be idempotent.
    """
    decisions: dict[str, dict[str, Any]] = {}
    for call in calls:
        if runtime.requires_approval(call.get("name", "")):
            request = {
                "kind": "tool_approval",
                "tool_call_id": call["id"],
                "name": call["name"],
                "args": call.get("args") or {},
                "question": f"Allow the agent to run {call['name']}?",
            }
            decisions[call["id"]] = normalize_decision(interrupt(request))
    return decisions
