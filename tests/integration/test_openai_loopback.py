"""The real langchain-openai client against a loopback OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path

from agent.runner import AgentRunner
from tests.support.openai_server import OpenAIStub
from tests.support.runners import make_config

RESPONSES = [
    {"content": '{"plan": "compute", "todos": ["add"]}', "usage": {"prompt_tokens": 50, "completion_tokens": 12}},
    {
        "tool_calls": [{"name": "calculator", "args": {"expression": "6*7"}}],
        "usage": {"prompt_tokens": 80, "completion_tokens": 9},
    },
    {"content": "The answer is", "finish_reason": "length", "usage": {"prompt_tokens": 120, "completion_tokens": 3}},
    {"content": "The answer is 42.", "usage": {"prompt_tokens": 121, "completion_tokens": 6}},
]


def _runner(tmp_path: Path, stub: OpenAIStub) -> AgentRunner:
    cfg = make_config(
        tmp_path,
        model={"provider": "openai", "name": "local-model", "base_url": stub.base_url, "script": None},
    )
    return AgentRunner.from_config(cfg)


def test_tool_calls_usage_and_length_through_the_real_client(tmp_path: Path) -> None:
    """Tool calls run, usage is recorded, a LENGTH finish is retried, and the run completes."""
    with OpenAIStub(RESPONSES) as stub:
        runner = _runner(tmp_path, stub)
        events = list(runner.stream("what is six times seven?"))
    result = events[-1].data
    assert result["status"] == "COMPLETED"
    assert result["answer"].strip() == "The answer is 42."
    finishes = [e.data["finish_reason"] for e in events if e.kind == "model_call"]
    assert finishes == ["stop", "tool_calls", "length", "stop"]
    usages = [e.data["usage"]["input_tokens"] for e in events if e.kind == "model_call"]
    assert usages == [50, 80, 120, 121]
    state = runner.state(result["session_id"])
    tool_msgs = [m for m in state["messages"] if m.type == "tool"]
    assert tool_msgs[0].content == "42"
    # the truncated reply is not left in the model's context
    assert not any(m.content == "The answer is" for m in state["messages"])
    # the second request carried the tools; the retry after LENGTH carried the tool result
    assert any(t["function"]["name"] == "calculator" for t in stub.requests[1]["body"]["tools"])
    last_msgs = stub.requests[3]["body"]["messages"]
    assert any(m["role"] == "tool" and m["content"] == "42" for m in last_msgs)


def test_no_key_needed_for_a_local_base_url(tmp_path: Path) -> None:
    """A local server without auth works with no OPENAI_API_KEY set; the key never leaks as a real one."""
    with OpenAIStub([RESPONSES[0], {"content": "hi"}]) as stub:
        result = _runner(tmp_path, stub).run("say hi")
    assert result.status == "COMPLETED" and result.answer.strip() == "hi"
    assert stub.requests[0]["auth"] == "Bearer not-needed"
