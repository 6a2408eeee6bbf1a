"""What a real model gets wrong, pinned with the scripted model: each case has its event and outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.core.results import RunEvent
from agent.loop.tool_pairs import assert_tool_pairs
from agent.runner import AgentRunner
from checkpointing.entry_log import EventLog
from checkpointing.messages import messages_to_dtos
from tests.support.runners import make_config

PLAN = {"content": '{"plan": "p", "todos": ["a"]}'}
CALC = {"tool_calls": [{"name": "calculator", "args": {"expression": "6*7"}}]}
NOT_JSON = '{"expression": six times seven}'


def run(tmp_path: Path, script: list[dict[str, Any]], text: str = "what is six times seven?", **sections: Any):
    """Stream one run; returns (runner, events, result dict)."""
    runner = AgentRunner.from_config(make_config(tmp_path, script, **sections))
    events = list(runner.stream(text))
    result = events[-1].data
    assert result["status"] in ("COMPLETED", "FAILED"), result
    assert runner.state(result["session_id"])["model_call_count"] == len(script)  # the script was used up
    rt: Any = runner.builder.last_runtime(result["session_id"])
    if rt is not None:  # the scripted model (tools bound or not) that answered last has nothing left
        last = max((m for m in (rt.model, rt._bound) if m is not None), key=lambda m: m.cursor)
        last.assert_complete()
    return runner, events, result


def model_calls(events: list[RunEvent], node: str | None = None) -> list[dict[str, Any]]:
    return [e.data for e in events if e.kind == "model_call" and node in (None, e.data.get("node"))]


def issues(events: list[RunEvent]) -> list[tuple[str, str]]:
    return [(i["issue"], i["outcome"]) for mc in model_calls(events) for i in mc.get("issues") or []]


def context(runner: AgentRunner, sid: str) -> list[dict[str, Any]]:
    msgs = runner.state(sid)["messages"]
    assert_tool_pairs(msgs)
    return [dict(d) for d in messages_to_dtos(msgs)]  # the canonical DTOs: plain dicts to assert on


def logged(runner: AgentRunner, sid: str, kind: str) -> list[dict[str, Any]]:
    log = EventLog(runner.settings.base_dir, runner.settings.session.tenant_id, sid)
    return [e.payload for e in log.entries() if e.type == kind]


def test_a_prose_plan_becomes_a_fallback_plan_from_its_list(tmp_path: Path) -> None:
    """Prose instead of the JSON plan: its bullet items become the todos, and the event names the issue."""
    prose = {"content": "Sure! Here is what I will do:\n- multiply the numbers\n- report the product"}
    runner, events, result = run(tmp_path, [prose, {"content": "42"}])
    assert result["status"] == "COMPLETED" and result["answer"] == "42"
    assert ("plan_not_json", "fallback_plan") in issues(events)
    state = runner.state(result["session_id"])
    assert [t["title"] for t in state["task_todo_list"]] == ["multiply the numbers", "report the product"]
    assert model_calls(events, "planning")[0]["issues"][0]["todos"] == 2


def test_an_empty_or_listless_plan_falls_back_to_the_users_task(tmp_path: Path) -> None:
    """No JSON and no list (or nothing at all): one todo, the user's request, and the run goes on."""
    runner, events, result = run(tmp_path, [{"content": ""}, {"content": "42"}], text="multiply six by seven")
    assert result["status"] == "COMPLETED"
    state = runner.state(result["session_id"])
    assert [t["title"] for t in state["task_todo_list"]] == ["multiply six by seven"]
    assert "multiply six by seven" in state["task_plan_text"]
    assert model_calls(events, "planning")[0]["issues"][0]["detail"] == "empty reply"


def test_malformed_json_arguments_get_a_tool_error_and_the_pairing_stays_valid(tmp_path: Path) -> None:
    """Arguments that are not JSON: an error ToolMessage for that call; the model reads it and goes on."""
    bad = {"raw_tool_calls": [{"name": "calculator", "arguments": NOT_JSON}]}
    answer = {"content": "42", "expect_in_prompt": "are not a JSON object"}
    runner, events, result = run(tmp_path, [PLAN, bad, answer])
    assert result["status"] == "COMPLETED" and result["answer"] == "42"
    assert ("invalid_tool_args", "tool_error_to_model") in issues(events)
    msgs = context(runner, result["session_id"])
    ai = next(m for m in msgs if m.get("invalid_tool_calls"))
    call = ai["invalid_tool_calls"][0]
    assert call["args"] == NOT_JSON  # kept as the model wrote it
    tool = next(m for m in msgs if m["role"] == "tool")
    assert tool["tool_call_id"] == call["id"] and tool["status"] == "error"
    assert NOT_JSON in tool["content"]
    results = logged(runner, result["session_id"], "tool_result")
    assert [(r["tool_call_id"], r["status"]) for r in results] == [(call["id"], "error")]


def test_arguments_failing_the_schema_get_a_tool_error_naming_the_field(tmp_path: Path) -> None:
    """JSON that does not match the tool's parameters: the model is told which field is wrong."""
    bad = {"tool_calls": [{"name": "calculator", "args": {"expr": "6*7"}}]}
    answer = {"content": "42", "expect_in_prompt": "invalid arguments for calculator"}
    runner, _, result = run(tmp_path, [PLAN, bad, answer])
    assert result["status"] == "COMPLETED"
    tool = next(m for m in context(runner, result["session_id"]) if m["role"] == "tool")
    assert tool["status"] == "error" and "expression" in tool["content"]


def test_an_unknown_tool_is_reported_and_answered_with_the_available_tools(tmp_path: Path) -> None:
    """A tool name that does not exist: an `unknown_tool` issue, and an error listing the real tools."""
    bad = {"tool_calls": [{"name": "multiply_numbers", "args": {"a": 6, "b": 7}}]}
    runner, events, result = run(tmp_path, [PLAN, bad, {"content": "42", "expect_in_prompt": "calculator"}])
    assert result["status"] == "COMPLETED"
    found = [i for mc in model_calls(events, "reasoning") for i in mc["issues"] if i["issue"] == "unknown_tool"]
    assert found and found[0]["name"] == "multiply_numbers"
    tool = next(m for m in context(runner, result["session_id"]) if m["role"] == "tool")
    assert "unknown tool 'multiply_numbers'" in tool["content"] and "calculator" in tool["content"]


def test_missing_and_duplicate_call_ids_get_fresh_unique_ids(tmp_path: Path) -> None:
    """Calls without ids (or sharing one) each get their own id, and each is answered exactly once."""
    missing = {**CALC, "tool_calls": CALC["tool_calls"] * 2, "omit_ids": True}
    calc_with = {"name": "calculator", "args": {"expression": "1+1"}, "id": "same"}
    dup = {"tool_calls": [calc_with, calc_with]}
    runner, events, result = run(tmp_path, [PLAN, missing, dup, {"content": "done"}])
    assert result["status"] == "COMPLETED"
    found = issues(events)
    assert found.count(("missing_call_id", "id_assigned")) == 2
    assert found.count(("duplicate_call_id", "id_assigned")) == 1
    tools = [m for m in context(runner, result["session_id"]) if m["role"] == "tool"]
    ids = [m["tool_call_id"] for m in tools]
    assert len(ids) == 4 and len(set(ids)) == 4 and all(ids)
    assert [m["content"] for m in tools] == ["42", "42", "2", "2"]


def test_an_empty_reply_is_not_kept_and_is_asked_again_with_a_hint(tmp_path: Path) -> None:
    """An empty reply is not an answer: it stays out of the context and the model is nudged once more."""
    answer = {"content": "42", "expect_in_prompt": "Your last reply was empty"}
    runner, events, result = run(tmp_path, [PLAN, {"content": ""}, answer])
    assert result["status"] == "COMPLETED" and result["answer"] == "42"
    assert ("empty_reply", "retry_with_hint") in issues(events)
    msgs = context(runner, result["session_id"])
    assert [m["content"] for m in msgs if m["role"] == "ai"] == ["42"]
    assert not any("Your last reply was empty" in str(m.get("content")) for m in msgs)  # the hint is not kept


def test_a_model_that_only_answers_empty_ends_failed_with_a_named_reason(tmp_path: Path) -> None:
    """Empty replies count as failing iterations: the failure guard ends the run, no endless retry."""
    empty = {"content": ""}
    _, _, result = run(tmp_path, [PLAN, empty, empty], loop={"max_consecutive_failures": 2, "max_replans": 0})
    assert result["status"] == "FAILED" and result["finish_reason"] == "too_many_failures"


def test_no_usage_uses_the_estimate_and_the_event_says_so(tmp_path: Path) -> None:
    """Without a usage block the event carries an estimate marked as such; with one, the server's figures."""
    plan = {**PLAN, "omit_usage": True}
    answer = {"content": "42", "usage": {"input_tokens": 321, "output_tokens": 7}}
    runner, events, result = run(tmp_path, [plan, answer])
    planning, reasoning = model_calls(events)
    assert planning["usage_source"] == "estimate" and planning["usage"]["input_tokens"] > 0
    assert ("no_usage", "token_estimate") in [(i["issue"], i["outcome"]) for i in planning["issues"]]
    assert reasoning["usage_source"] == "server" and reasoning["usage"]["input_tokens"] == 321
    recorded = logged(runner, result["session_id"], "model_call")
    assert [r["usage_source"] for r in recorded] == ["estimate", "server"]
    assert result["input_tokens"] == 321  # run totals count only what a server reported


def test_a_model_that_keeps_sending_malformed_calls_is_stopped(tmp_path: Path) -> None:
    """Bad calls are failing iterations: the guard ends the run with a named reason, never a traceback."""
    bad = {"raw_tool_calls": [{"name": "calculator", "arguments": "six times seven"}]}
    runner, _, result = run(tmp_path, [PLAN, bad, bad], loop={"max_consecutive_failures": 2, "max_replans": 0})
    assert result["status"] == "FAILED" and result["finish_reason"] == "too_many_failures"
    tools = [m for m in context(runner, result["session_id"]) if m["role"] == "tool"]
    assert len(tools) == 2 and all(m["status"] == "error" for m in tools)


def test_a_model_that_never_stops_calling_tools_hits_the_loop_guard(tmp_path: Path) -> None:
    """Valid tool calls forever: max_iterations ends the run FAILED with its reason."""
    _, _, result = run(tmp_path, [PLAN, CALC, CALC], loop={"max_iterations": 2})
    assert result["status"] == "FAILED" and result["finish_reason"] == "max_iterations"
