"""nodes/_model_output.py as pure functions: ids, classification, usage, plan fallback, hint."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage

from nodes import _model_output as out


def test_ids_are_filled_and_deduplicated_against_the_session_and_the_message() -> None:
    """Missing, reused-in-message and reused-from-history ids each get a fresh one; good ids are kept."""
    reply = AIMessage(
        content="",
        tool_calls=[
            {"name": "a", "args": {}, "id": "ok"},
            {"name": "b", "args": {}, "id": "ok"},
            {"name": "c", "args": {}, "id": "old"},
            {"name": "d", "args": {}, "id": None},
        ],
        invalid_tool_calls=[{"name": "e", "args": "{", "id": None, "error": "bad", "type": "invalid_tool_call"}],
    )
    fixed, issues = out.sanitize_reply(reply, prefix="call-7", seen_ids={"old"})
    ids = [tc["id"] for tc in fixed.tool_calls] + [tc["id"] for tc in fixed.invalid_tool_calls]
    assert ids[0] == "ok" and len(set(ids)) == 5 and "old" not in ids and all(ids)
    kinds = [i["issue"] for i in issues]
    assert kinds.count("duplicate_call_id") == 2 and kinds.count("missing_call_id") == 2
    assert kinds.count("invalid_tool_args") == 1


def test_a_call_id_no_command_could_name_is_replaced() -> None:
    """An id with a terminal escape, a slash or 10,000 characters gets a fresh one (`unusable_call_id`)."""
    bad = ["\x1b[31mX", "../x", "a" * 10_000]
    reply = AIMessage(content="", tool_calls=[{"name": "a", "args": {}, "id": i} for i in [*bad, "call_1"]])
    fixed, issues = out.sanitize_reply(reply, prefix="call-7", seen_ids=())
    ids = [tc["id"] for tc in fixed.tool_calls]
    assert ids[-1] == "call_1" and not set(ids) & set(bad) and len(set(ids)) == 4
    assert [i["issue"] for i in issues] == ["unusable_call_id"] * 3


def test_a_streamed_chunk_becomes_a_plain_ai_message() -> None:
    """The merged chunk of a streamed reply is stored as a plain AIMessage with its calls and usage."""
    chunk = AIMessageChunk(
        content="hi", id="x", usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}
    )
    msg, issues = out.sanitize_reply(chunk, prefix="p", seen_ids=())
    assert type(msg) is AIMessage and msg.content == "hi" and msg.usage_metadata and not issues


def test_classify_names_empty_truncated_unknown_and_no_usage() -> None:
    """Each case gets its issue; an empty reply cut by max_tokens is `truncated`, not `empty_reply`."""
    empty = AIMessage(content="  ")
    assert [i["issue"] for i in out.classify(empty, "stop", {"calculator"})] == ["empty_reply", "no_usage"]
    assert [i["issue"] for i in out.classify(empty, "length", ())] == ["truncated", "no_usage"]
    unknown = AIMessage(
        content="", tool_calls=[{"name": "nope", "args": {}, "id": "1"}],
        usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    )  # fmt: skip
    assert [i["issue"] for i in out.classify(unknown, "tool_calls", {"calculator"})] == ["unknown_tool"]
    blocks = AIMessage(content=[{"type": "text", "text": "answer"}])
    assert not out.is_empty(blocks)


def test_usage_is_the_servers_or_a_marked_estimate() -> None:
    """The server's counts are passed through; without them an estimate is made and marked."""
    prompt = [SystemMessage("be brief"), HumanMessage("what is six times seven?")]
    served = AIMessage(content="42", usage_metadata={"input_tokens": 11, "output_tokens": 2, "total_tokens": 13})
    assert out.usage_of(served, prompt) == ({"input_tokens": 11, "output_tokens": 2, "total_tokens": 13}, "server")
    usage, source = out.usage_of(AIMessage(content="42"), prompt)
    assert source == out.UsageSource.ESTIMATE and usage["input_tokens"] > 0 and usage["output_tokens"] > 0


def test_plan_fallback_is_bounded() -> None:
    """A JSON plan is kept; prose is capped, its list gives at most 8 todos, and nothing gives the task."""
    assert out.checked_plan('{"plan": "p", "todos": ["a"]}', "p", ["a"], "task") == ("p", ["a"], [])
    plan, todos, issues = out.checked_plan("x" * 5000, "x" * 5000, [f"s{i}" for i in range(20)], "task")
    assert len(plan) == out.MAX_PLAN_CHARS and len(todos) == out.MAX_TODOS and issues[0]["issue"] == "plan_not_json"
    plan, todos, _ = out.checked_plan("", "", [], "add 2 and 2")
    assert todos == ["add 2 and 2"] and "add 2 and 2" in plan


def test_the_hint_follows_only_an_empty_reply() -> None:
    """The nudge is added to the prompt after an empty reply, and only then."""
    prompt = [HumanMessage("q")]
    assert out.with_retry_hint(prompt, {"finish_reason": "stop"}) == prompt
    hinted = out.with_retry_hint(prompt, {"finish_reason": out.EMPTY})
    assert hinted[-1].content == out.EMPTY_REPLY_HINT and len(prompt) == 1


def test_invalid_calls_are_answered_in_order_with_events() -> None:
    """Each unparseable call gets one error ToolMessage with its id, and a tool_call + tool_result event."""
    ai = {"invalid_tool_calls": [{"name": "calculator", "args": "6*7", "id": "c1", "error": "Received bad JSON"}]}
    seen: list[tuple[str, dict]] = []
    answers = out.invalid_call_answers(ai, lambda kind, payload: seen.append((kind, payload)))
    assert len(answers) == 1 and isinstance(answers[0], ToolMessage)
    assert answers[0].tool_call_id == "c1" and answers[0].status == "error" and "6*7" in answers[0].content
    assert [k for k, _ in seen] == ["tool_call", "tool_result"]
    assert out.invalid_call_answers(None, lambda *_: None) == []
