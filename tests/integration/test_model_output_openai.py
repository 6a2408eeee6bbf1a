"""Malformed model output through the real langchain-openai client (loopback server), streamed and plain."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.loop.tool_pairs import assert_tool_pairs
from agent.runner import AgentRunner
from tests.support.openai_server import OpenAIStub
from tests.support.runners import make_config

PLAN = {"content": "I will just compute it."}  # prose, not the JSON plan
BAD = {"tool_calls": [{"name": "calculator", "raw_args": '{"expression": six times seven}'}], "no_usage": True}
EMPTY = {"content": ""}
ANSWER = {"content": "The answer is 42."}


@pytest.mark.parametrize("streaming", [True, False])
def test_prose_plan_bad_arguments_empty_reply_and_no_usage_through_the_real_client(
    tmp_path: Path, streaming: bool
) -> None:
    """Each case gets its issue in the events and its outcome; the history sent back stays well paired."""
    with OpenAIStub([PLAN, BAD, EMPTY, ANSWER]) as stub:
        cfg = make_config(
            tmp_path,
            model={"provider": "openai", "name": "local", "base_url": stub.base_url, "script": None,
                   "streaming": streaming, "max_output_tokens": 64},
        )  # fmt: skip
        runner = AgentRunner.from_config(cfg)
        events = list(runner.stream("what is six times seven?"))
    result = events[-1].data
    assert result["status"] == "COMPLETED" and result["answer"].strip() == "The answer is 42."
    found = [i["issue"] for e in events if e.kind == "model_call" for i in e.data["issues"]]
    assert {"plan_not_json", "invalid_tool_args", "no_usage", "empty_reply"} <= set(found)
    assert_tool_pairs(runner.state(result["session_id"])["messages"])
    # The malformed call went back to the server as written, answered by its error right after it.
    sent = stub.requests[3]["body"]["messages"]
    ai = next(m for m in sent if m.get("tool_calls"))
    assert ai["tool_calls"][0]["function"]["arguments"] == '{"expression": six times seven}'
    tool = sent[sent.index(ai) + 1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == ai["tool_calls"][0]["id"]
    assert "not a JSON object" in tool["content"]
    assert sent[-1]["role"] == "user" and "empty" in sent[-1]["content"]  # the one-off hint
    # llama.cpp and Ollama read max_tokens, OpenAI max_completion_tokens: both are sent to a base_url
    assert stub.requests[0]["body"]["max_tokens"] == stub.requests[0]["body"]["max_completion_tokens"] == 64
    assert bool(stub.requests[1]["body"].get("stream")) is streaming
