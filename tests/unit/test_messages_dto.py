"""Canonical message DTOs: every LangChain message type survives the round trip."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from checkpointing.errors import UnsupportedValueError
from checkpointing.messages import dto_to_message, message_to_dto

CASES = [
    SystemMessage("be careful", id="s1"),
    HumanMessage("hi ünïcode ✓", id="h1", name="ann"),
    HumanMessage([{"type": "text", "text": "multi"}, {"type": "text", "text": "part"}], id="h2"),
    AIMessage(
        "",
        id="a1",
        tool_calls=[
            {"id": "c1", "name": "read_file", "args": {"path": "a.txt"}},
            {"id": "c2", "name": "f", "args": {}},
        ],
        usage_metadata={"input_tokens": 30, "output_tokens": 7, "total_tokens": 37},
        response_metadata={"finish_reason": "tool_calls", "model_name": "m"},
    ),
    AIMessage("done", id="a2", additional_kwargs={"refusal": None}),
    ToolMessage("result", tool_call_id="c1", name="read_file", id="t1"),
    ToolMessage("boom", tool_call_id="c2", status="error", artifact={"k": [1, 2]}),
    ChatMessage("note", role="critic", id="x1"),
    FunctionMessage("42", name="calc"),
    AIMessageChunk("par", id="k1", tool_call_chunks=[{"id": "c3", "name": "g", "args": '{"a": 1}', "index": 0}]),
    RemoveMessage(id="gone"),
]


@pytest.mark.parametrize("msg", CASES, ids=lambda m: type(m).__name__)
def test_round_trip_is_lossless(msg: object) -> None:
    """message -> DTO -> JSON text -> DTO -> message gives an equal message."""
    dto = message_to_dto(msg)  # type: ignore[arg-type]
    back = dto_to_message(json.loads(json.dumps(dto)))
    assert back == msg
    assert type(back) is type(msg)


def test_tool_call_pairing_survives() -> None:
    """The AI tool call ids and the tool message ids still pair after the round trip."""
    ai, tool = dto_to_message(message_to_dto(CASES[3])), dto_to_message(message_to_dto(CASES[5]))
    assert isinstance(ai, AIMessage) and isinstance(tool, ToolMessage)
    assert ai.tool_calls[0]["id"] == tool.tool_call_id


def test_unknown_role_is_refused() -> None:
    """A DTO naming a role outside the closed set is not decoded into anything."""
    with pytest.raises(UnsupportedValueError):
        dto_to_message({"role": "__import__", "content": "os"})


def test_non_json_content_is_refused_at_encode() -> None:
    """A message carrying a non-JSON value fails clearly instead of writing junk."""
    with pytest.raises(UnsupportedValueError):
        message_to_dto(ToolMessage("x", tool_call_id="c", artifact=object()))
