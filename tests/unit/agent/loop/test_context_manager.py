"""ContextManager decisions on constructed states: which tier, what it rewrites, when it gives up."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from agent.core.config import AgentSettings
from agent.core.tool_spec import ToolContext
from agent.loop.compression import SUMMARY_KEY, CompressionTier, assert_tool_pairs, is_archived, is_summary
from agent.loop.context_manager import SUMMARY_INSTRUCTIONS, ContextManager
from agent.loop.models import ModelScript, ScriptedChatModel, ScriptedResponse
from agent.loop.runtime import LoopRuntime
from graph.state import merge_messages

RESULT_CHARS = 2000  # about 500 tokens for the estimator


def settings(window: int = 10_000, **compression: Any) -> AgentSettings:
    """Settings with a scripted model (estimator counting) and a `window`-token context."""
    return AgentSettings.model_validate(
        {"model": {"name": "scripted-unit", "context_window": window}, "compression": compression}
    )


def runtime(cfg: AgentSettings, summaries: list[str] | None = None) -> tuple[LoopRuntime, list[tuple[str, dict]]]:
    """A real LoopRuntime with a scripted model answering summaries; returns it and its event list."""
    events: list[tuple[str, dict]] = []
    model = ScriptedChatModel(script=ModelScript(responses=[ScriptedResponse(content=s) for s in summaries or []]))
    rt = LoopRuntime(
        settings=cfg,
        session_id="s-unit",
        tenant_id="t",
        run_id="r",
        model=model,
        tools={},
        tool_context=ToolContext(session_id="s-unit", tenant_id="t", run_id="r"),
        compressor=ContextManager(cfg),
        sinks=[lambda kind, payload: events.append((kind, payload))],
    )
    return rt, events


def history(steps: int, *, usage: int | None = None) -> list[BaseMessage]:
    """system, task, then `steps` tool-call units with ~500-token results; `usage` on the last AI."""
    msgs: list[BaseMessage] = [SystemMessage("You are an agent.", id="sys"), HumanMessage("Do it.", id="task")]
    for i in range(steps):
        last = usage is not None and i == steps - 1
        meta = UsageMetadata(input_tokens=usage, output_tokens=5, total_tokens=usage + 5) if last and usage else None
        calls = [{"id": f"c{i}", "name": "fetch", "args": {"i": i}}]
        msgs.append(AIMessage("", id=f"ai-{i}", tool_calls=calls, usage_metadata=meta))
        msgs.append(ToolMessage(f"result {i}: " + "z" * RESULT_CHARS, tool_call_id=f"c{i}", name="fetch", id=f"t{i}"))
    return msgs


def state(msgs: list[BaseMessage], **extra: Any) -> dict[str, Any]:
    """A graph state holding `msgs` as its model context."""
    return {"messages": list(msgs), "model_call_count": 5, **extra}


def new_context(update: dict[str, Any]) -> list[BaseMessage]:
    """The context a compression update writes: it must replace the whole `messages` list."""
    head, *rest = update["messages"]
    assert isinstance(head, RemoveMessage) and head.id == REMOVE_ALL_MESSAGES
    assert not any(isinstance(m, RemoveMessage) for m in rest)
    return rest


def apply(st: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """The state after `update` as the graph applies it (messages through their reducer)."""
    out = {**st, **{k: v for k, v in update.items() if k != "execution_history_text"}}
    if "messages" in update:
        out["messages"] = merge_messages(st["messages"], [update["messages"]])
        assert out["messages"] == new_context(update)
    return out


def test_below_half_the_window_nothing_happens() -> None:
    """Under 50% usage no tier is due and compress changes nothing, emits nothing."""
    cfg = settings()
    rt, events = runtime(cfg)
    st = state(history(3))
    assert rt.compressor.tier(st) is CompressionTier.NONE and not rt.compression_due(st)
    assert rt.compress(st, reason="budget") == {} and events == []


def test_real_input_tokens_of_the_last_reply_drive_the_tier() -> None:
    """A reply's reported input_tokens count, not the estimate: 8,000 used of 10,000 -> placeholder."""
    cfg = settings()
    small = state(history(3))
    reported = state(history(3, usage=8_000))
    manager = ContextManager(cfg)
    assert manager.tier(small) is CompressionTier.NONE
    assert manager.prompt_tokens(reported) > 8_000
    assert manager.tier(reported) is CompressionTier.PLACEHOLDER


def test_pointer_tier_archives_all_but_the_last_three_and_emits_the_event() -> None:
    """At 50-80% the three newest results stay whole; the event records counts, tokens and ids."""
    cfg = settings(window=8_000)
    rt, events = runtime(cfg)
    st = state(history(8))
    assert rt.compressor.tier(st) is CompressionTier.POINTER
    update = rt.compress(st, reason="budget")
    msgs = new_context(update)
    tool_msgs = [m for m in msgs if isinstance(m, ToolMessage)]
    assert [is_archived(m) for m in tool_msgs] == [True] * 5 + [False] * 3
    assert_tool_pairs(msgs)
    [(kind, payload)] = events
    assert kind == "compression" and payload["tier"] == "pointer" and payload["reason"] == "budget"
    assert payload["original_count"] == payload["new_count"] == 18
    assert payload["archived_tool_call_ids"] == ["c0", "c1", "c2", "c3", "c4"]
    assert payload["tokens_after"] < payload["tokens_before"] and payload["summary"] is None
    assert "model_call_count" not in update and "context_compression_count" not in update
    # the next measurement starts from the compressed size (kept in state for a resumed process)
    after = apply(st, update)
    assert ContextManager(cfg).prompt_tokens(after) == payload["tokens_after"]


def test_hard_tier_asks_the_model_at_the_session_call_index_and_counts() -> None:
    """At >= 95% the scripted model's response n summarizes older units; both counters advance."""
    cfg = settings(window=4_000)
    rt, events = runtime(cfg, summaries=["unused"] * 5 + ["SUMMARY: fetched 0..7"])
    st = state(history(8))
    assert rt.compressor.tier(st) is CompressionTier.HARD
    update = rt.compress(st, reason="budget")
    assert update["model_call_count"] == 6 and update["context_compression_count"] == 1
    msgs = new_context(update)
    assert [m.id for m in msgs[:2]] == ["sys", "task"] and is_summary(msgs[2])
    assert "SUMMARY: fetched 0..7" in str(msgs[2].content) and SUMMARY_KEY in msgs[2].additional_kwargs
    assert len(msgs) == 7 and msgs[-1].id == "t7" and not is_archived(msgs[-1])
    assert_tool_pairs(msgs)
    prompt = rt.model.calls[0]  # type: ignore[attr-defined]
    assert prompt[0].content == SUMMARY_INSTRUCTIONS and prompt[-1].content == SUMMARY_INSTRUCTIONS
    payload = next(p for k, p in events if k == "compression")
    assert payload["summary"] == "SUMMARY: fetched 0..7" and payload["new_count"] == 7
    assert payload["archived_tool_call_ids"][:6] == [f"c{i}" for i in range(6)]
    assert [p["node"] for k, p in events if k == "model_call"] == ["memory"]


def test_after_the_last_allowed_hard_compression_placeholders_are_used() -> None:
    """With max_hard_compressions spent the model is not called; placeholders are the last resort."""
    cfg = settings(window=4_300, max_hard_compressions=1)
    rt, events = runtime(cfg)  # no scripted responses: a model call would fail
    st = state(history(8), context_compression_count=1)
    update = rt.compress(st, reason="budget")
    assert "context_compression_count" not in update and update.get("loop_signal") is None
    msgs = new_context(update)
    assert sum(is_archived(m) for m in msgs) == 7
    assert events[0][1]["tier"] == "placeholder" and not events[0][1]["exhausted"]


def test_nothing_to_summarize_uses_no_hard_compression() -> None:
    """A hard-tier context with no older unit calls no model and does not spend a hard compression."""
    cfg = settings(window=300)
    rt, _ = runtime(cfg)
    st = state(history(1))  # system, task, one unit bigger than the window
    update = rt.compress(st, reason="budget")
    assert "context_compression_count" not in update and "model_call_count" not in update
    assert update["loop_signal"] == "REPLAN"


def test_exhausted_context_signals_replan_with_a_fresh_compact_context() -> None:
    """When even the last resort does not fit: REPLAN, the reason in error, system + task + progress note."""
    cfg = settings(window=500, max_hard_compressions=0)
    rt, events = runtime(cfg)
    st = state(history(4), execution_history_text=["turn 1: user asked: Do it.", "tool fetch(c0) -> success"])
    update = rt.compress(st, reason="budget")
    assert update["loop_signal"] == "REPLAN"
    assert "context window exhausted" in update["error"] and "500-token window" in update["error"]
    msgs = new_context(update)
    assert [m.id for m in msgs[:2]] == ["sys", "task"] and len(msgs) == 3
    assert "tool fetch(c0) -> success" in str(msgs[2].content) and "read_tool_result" in str(msgs[2].content)
    payload = events[0][1]
    assert payload["exhausted"] and payload["new_count"] == 3 and payload["original_count"] == 10
    assert ContextManager(cfg).prompt_tokens(apply(st, update)) == payload["tokens_after"]


def test_length_finish_goes_one_tier_further() -> None:
    """A truncated reply below 50% still compresses (pointer tier), with reason length."""
    cfg = settings(window=40_000)
    rt, events = runtime(cfg)
    st = state(history(5))
    assert rt.compress(st, reason="budget") == {}
    update = rt.compress(st, reason="length")
    assert events[0][1]["tier"] == "pointer" and events[0][1]["reason"] == "length"
    assert sum(is_archived(m) for m in new_context(update)) == 2


def test_disabled_compression_never_compresses() -> None:
    """compression.enabled=false: never due, compress is a no-op even far over the window."""
    cfg = settings(window=500, enabled=False)
    rt, events = runtime(cfg)
    st = state(history(6))
    assert not rt.compressor.due(st)
    assert rt.compress(st, reason="budget") == {} and rt.compress(st, reason="length") == {} and events == []
