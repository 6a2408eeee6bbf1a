"""reasoning: pre-check the token budget, then call the model with tools bound."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graph.context import AgentContext, invoke_model, loop_runtime
from graph.state import RouteInput, TaskExecutionState
from nodes import _model_output as out
from nodes._util import prompt_messages


def reasoning_node(state: TaskExecutionState, config: RunnableConfig, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """One model call; its usage and finish reason are recorded on the AI message and in state."""
    rt = loop_runtime(runtime, state, config)
    if state.get("loop_signal") != "COMPRESSED" and rt.compression_due(state):
        return {"loop_signal": "COMPRESS"}
    call_index = int(state.get("model_call_count") or 0)
    prompt = prompt_messages(state, rt.system_prompt(state))
    prompt = out.with_retry_hint(prompt, state.get("last_iteration_result"))
    model = rt.chat_model(call_index, with_tools=True)
    reply = invoke_model(model, prompt, config, rt.session_id, call_index, rt.own_errors)
    answered = out.answered_ids(prompt)  # the context's tool results: the prompt holds all of them
    reply, issues = out.sanitize_reply(reply, prefix=f"call-{call_index}", seen_ids=answered)
    if reply.id is None:
        reply = reply.model_copy(update={"id": f"ai-{rt.run_id}-{call_index}"})
    reply = unique_tool_call_ids(reply, answered, f"call-{call_index}")
    finish = (reply.response_metadata or {}).get("finish_reason") or ("tool_calls" if reply.tool_calls else "stop")
    usage = dict(reply.usage_metadata) if reply.usage_metadata else None
    issues += out.classify(reply, finish, getattr(rt, "tools", None) or ())
    shown, source = out.usage_of(reply, prompt)
    empty = out.is_empty(reply) and finish != "length"
    rt.emit(
        "model_call",
        {
            "node": "reasoning",
            "call_index": call_index,
            "usage": shown,
            "usage_source": source.value,
            "finish_reason": finish,
            "tool_calls": [tc["name"] for tc in reply.tool_calls],
            "issues": issues,
        },
    )
    totals: dict[str, int] = dict(state.get("token_usage") or {})
    used: dict[str, Any] = usage or {}
    for key in ("input_tokens", "output_tokens"):
        totals[key] = int(totals.get(key) or 0) + int(used.get(key) or 0)
    update: dict[str, Any] = {
        "model_call_count": call_index + 1,
        "token_usage": totals,
        "last_usage": usage,
        "loop_signal": None,
        "last_iteration_result": {
            "finish_reason": out.EMPTY if empty else finish,
            "tool_calls": len(reply.tool_calls) + len(reply.invalid_tool_calls),
            **({"failures": 1} if empty else {}),
        },
    }
    if finish != "length" and not empty:
        # A truncated or empty reply is not kept in the model's context: memory compresses and we
        # retry; an empty one is asked again with a hint, and counts as a failing iteration.
        update["messages"] = [reply]
    return update


def unique_tool_call_ids(reply: AIMessage, answered: set[str], prefix: str) -> AIMessage:
    """Give every tool call a non-empty id unseen in this session.

    Approvals, the journal and tool-message pairing are keyed by the call id: a model (or server)
    that repeats or omits ids must not make two calls share one, or a rejected call could run.
    """
    seen = set(answered)
    fixed, changed = [], False
    for i, tc in enumerate(reply.tool_calls):
        tid = tc.get("id")
        if not isinstance(tid, str) or not tid or tid in seen:
            tid, changed = f"{prefix}-{i + 1}", True
        seen.add(tid)
        fixed.append({**tc, "id": tid})
    return reply.model_copy(update={"tool_calls": fixed}) if changed else reply


def route_after_reasoning(state: RouteInput) -> str:
    """acting when the model asked for tools; memory to compress; refining otherwise."""
    if state.get("loop_signal") == "COMPRESS":
        return "memory"
    result = state.get("last_iteration_result") or {}
    if result.get("finish_reason") == "length":
        return "memory"
    if result.get("tool_calls"):
        return "acting"
    return "refining"
