"""When nothing fits the window any more: replan, then FAILED (nothing lost); and LENGTH replies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig

from agent.loop.compression import assert_tool_pairs, is_archived
from agent.loop.models import ScriptedChatModel
from agent.runner import AgentRunner
from agent.tools.tool_results import ToolResultStore
from tests.support.runners import make_config

TOOL = {"custom": [{"path": "tests.e2e.test_context_exhaustion:sensor_dump"}]}


def sensor_dump(rows: int) -> str:
    """A large tool result: `rows` lines of sensor readings (about 70 characters a line)."""
    return "".join(f"row {i:05d} sensor=beta reading={i * 0.25:9.2f} status=ok\n" for i in range(rows))


def _dump(rows: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "sensor_dump", "args": {"rows": rows}}]}


def _plan(text: str) -> dict[str, Any]:
    return {"content": f'{{"plan": "{text}", "todos": ["Dump the sensors", "Report"]}}'}


def _runner(tmp_path: Path, responses: list[dict[str, Any]], window: int) -> AgentRunner:
    return AgentRunner.from_config(
        make_config(tmp_path, responses, model={"context_window": window, "name": "scripted-ctx"}, tools=TOOL)
    )


def _model(runner: AgentRunner, session_id: str) -> ScriptedChatModel:
    model = runner.builder.last_runtime(session_id).model  # type: ignore[attr-defined]
    assert isinstance(model, ScriptedChatModel)
    return model


EXHAUSTING = [
    _plan("Dump the sensors and report."),
    _dump(20),  # ~1,400 chars: fits
    _dump(100),  # ~7,000 chars, about 1,750 tokens: more than the whole 1,000-token window
    {"content": "SUMMARY 1: dumped 20 rows of beta sensors, then 100 rows."},
    _plan("Dump the sensors again, in one go."),
    _dump(100),
    {"content": "SUMMARY 2: after a reset, dumped 100 rows again."},
    _plan("Last try: dump the sensors."),
    _dump(100),
]


def test_window_too_small_replans_then_fails_with_its_reason(tmp_path: Path) -> None:
    """A result bigger than the window: two hard compressions, two replans, then FAILED context_exhausted."""
    runner = _runner(tmp_path, EXHAUSTING, window=1000)
    events = list(runner.stream("Dump the sensors and report.", new_session_id="s-exhaust"))
    result = events[-1].data
    assert result["status"] == "FAILED"
    assert result["finish_reason"] == "context_exhausted"
    assert "context window exhausted" in result["error"] and "1000-token window" in result["error"]
    assert "raise model.context_window" in result["error"]
    state = runner.state("s-exhaust")
    assert state["replan_count"] == 2 and state["context_compression_count"] == 2
    calls = _model(runner, "s-exhaust").calls
    assert result["model_calls"] == len(EXHAUSTING) == len(calls)
    # even on the way to failing, no request the model got reached 95% of the window
    assert max(count_tokens_approximately(p) for p in calls) < 950
    comps = [e.data for e in events if e.kind == "compression"]
    assert [c["exhausted"] for c in comps] == [True, True, True]
    assert [c["tier"] for c in comps] == ["hard", "hard", "placeholder"]
    assert [c["summary"] for c in comps][:2] == [EXHAUSTING[3]["content"], EXHAUSTING[6]["content"]]
    nodes = [e.data["node"] for e in events if e.kind == "node"]
    assert nodes.count("planning") == 3 and nodes[-1] == "refining"


def test_exhaustion_loses_nothing(tmp_path: Path) -> None:
    """After the failure every full result is still stored and the kept context has whole tool pairs."""
    runner = _runner(tmp_path, EXHAUSTING, window=1000)
    runner.run("Dump the sensors and report.", new_session_id="s-exhaust-kept")
    state = runner.state("s-exhaust-kept")
    store = ToolResultStore.from_entries(state["tool_result_store"], runner.blobs)
    assert len(store) == 4
    expected = [sensor_dump(20), sensor_dump(100), sensor_dump(100), sensor_dump(100)]
    assert [store.get(i) for i in store.ids()] == expected
    # the context itself was reset: no tool result is left in it whole, the store holds them all
    context = state["messages"]
    assert not any(isinstance(m, ToolMessage) and m.content in expected for m in context)
    assert_tool_pairs(context)
    assert "read_tool_result" in str(context[-1].content)  # the fresh context says how to read results back


def test_length_finish_compresses_retries_and_counts(tmp_path: Path) -> None:
    """A reply cut off by finish_reason=length is dropped from the context, compressed, retried, counted."""
    responses = [
        _plan("Dump four sensor banks, then report."),
        _dump(20),
        _dump(21),
        _dump(22),
        _dump(23),
        {"content": "The readings of bank one are 0.00, 0.25, 0.5", "finish_reason": "length"},
        {"content": "Four banks dumped; all sensors report status ok."},
    ]
    runner = _runner(tmp_path, responses, window=8000)
    events = list(runner.stream("Dump four sensor banks.", new_session_id="s-length"))
    result = events[-1].data
    assert result["status"] == "COMPLETED" and result["answer"].startswith("Four banks")
    assert result["model_calls"] == 7
    finishes = [e.data["finish_reason"] for e in events if e.kind == "model_call"]
    assert finishes[-2:] == ["length", "stop"]
    comps = [e.data for e in events if e.kind == "compression"]
    assert len(comps) == 1 and comps[0]["reason"] == "length" and comps[0]["tier"] == "pointer"
    assert comps[0]["archived_tool_call_ids"] == ["call_2_1"]
    # the retry's prompt has the archived result and not the truncated reply
    retry = _model(runner, "s-length").calls[-1]
    assert not any(isinstance(m, AIMessage) and "bank one" in str(m.content) for m in retry)
    assert any(isinstance(m, ToolMessage) and is_archived(m) and m.tool_call_id == "call_2_1" for m in retry)
    state = runner.state("s-length")
    assert not any("bank one" in str(m.content) for m in state["messages"])
    config: RunnableConfig = {"configurable": {"thread_id": "s-length", "tenant_id": "default"}}
    counted = [s.values.get("consecutive_failures") for s in runner.graph.get_state_history(config)]
    assert 1 in counted  # memory counted the truncation as a failure
    assert state["consecutive_failures"] == 0  # and the successful retry cleared it
