"""Canonical message DTOs: every LangChain message type survives the round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    ToolMessageChunk,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from checkpointing.codec import CheckpointStateCodec
from checkpointing.exceptions import UnsupportedValueError
from checkpointing.messages import dto_to_message, message_to_dto
from checkpointing.saver import JsonlCheckpointSaver

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


USAGE = {
    "input_tokens": 30,
    "output_tokens": 7,
    "total_tokens": 37,
    "input_token_details": {"cache_read": 10},
    "output_token_details": {"reasoning": 3},
}
META = {"finish_reason": "tool_calls", "model_name": "m"}
KWARGS = {"refusal": None, "extra_info": [1, {"a": "b"}]}
# Every field JsonPlusSerializer keeps, per message kind: partial tool-call JSON ("{"), extra
# attributes (`example=True`), usage details, metadata, kwargs, names and ids.
FIDELITY = [
    AIMessage(
        "calling",
        id="a1",
        name="planner",
        example=True,
        tool_calls=[{"id": "c1", "name": "read_file", "args": {"path": "a.txt"}}],
        invalid_tool_calls=[
            {"id": "c2", "name": "f", "args": "{not json", "error": "bad args", "type": "invalid_tool_call"}
        ],
        usage_metadata=USAGE,  # type: ignore[arg-type]
        response_metadata=META,
        additional_kwargs=KWARGS,
    ),
    AIMessage([{"type": "text", "text": "multi"}, {"type": "reasoning", "reasoning": "why"}], id="a2"),
    AIMessageChunk(
        "par",
        id="k1",
        name="planner",
        example=True,
        tool_call_chunks=[
            {"id": "c3", "name": "g", "args": "{", "index": 0},
            {"id": None, "name": None, "args": '"q": 1', "index": 0},
            {"id": "c4", "name": "h", "args": '{"z": [1, 2]}', "index": 1},
            {"id": "c5", "name": "k", "args": "[1]", "index": 2},
        ],
        usage_metadata=USAGE,  # type: ignore[arg-type]
        response_metadata=META,
        additional_kwargs=KWARGS,
    ),
    AIMessageChunk("", id="k2", tool_call_chunks=[{"id": "c6", "name": "g", "args": '{"a":1}', "index": 5}]),
    AIMessageChunk("end", id="k3", chunk_position="last"),
    AIMessageChunk("", id="k4", tool_calls=[{"id": "c7", "name": "g", "args": {"b": 2}}]),
    HumanMessage("hi", id="h1", name="ann", example=True, additional_kwargs=KWARGS, response_metadata=META),
    HumanMessageChunk("h", id="h2", example=True),
    ToolMessage(
        "result",
        tool_call_id="c1",
        name="read_file",
        id="t1",
        status="error",
        artifact={"rows": [1, 2], "nested": {"ok": False}},
        additional_kwargs=KWARGS,
        response_metadata=META,
    ),
    ToolMessageChunk("part", tool_call_id="c1", artifact=[1, "x"], status="error", id="t2"),
    SystemMessage("be careful", id="s1", name="sys", additional_kwargs=KWARGS, response_metadata=META),
    RemoveMessage(id="gone"),
    ChatMessage("note", role="critic", id="x1", name="n", additional_kwargs=KWARGS, response_metadata=META),
    ChatMessageChunk("no", role="critic", id="x2"),
    FunctionMessage("42", name="calc", id="f1", additional_kwargs=KWARGS, response_metadata=META),
]


def _jsonplus(msg: BaseMessage) -> BaseMessage:
    serde = JsonPlusSerializer()
    got: BaseMessage = serde.loads_typed(serde.dumps_typed(msg))
    return got


@pytest.mark.parametrize("msg", FIDELITY, ids=lambda m: f"{type(m).__name__}-{m.id}")
def test_codec_keeps_every_field_jsonplus_keeps(msg: BaseMessage) -> None:
    """Through the codec and JSON text, each message reads back equal to itself and to JsonPlus's copy."""
    codec = CheckpointStateCodec()
    back = codec.decode(json.loads(json.dumps(codec.encode(msg))))
    want = _jsonplus(msg)
    assert want == msg  # JsonPlus itself keeps all of it: the bar is met, not lowered
    assert back == msg and back == want
    assert type(back) is type(msg)
    assert back.model_dump() == want.model_dump()


def test_partial_tool_call_json_and_example_flag_survive() -> None:
    """What a streaming UI and a few-shot prompt read: the chunk's args text as streamed, `example`."""
    codec = CheckpointStateCodec()
    chunk = codec.decode(codec.encode(FIDELITY[2]))
    assert isinstance(chunk, AIMessageChunk)
    assert [c["args"] for c in chunk.tool_call_chunks] == ["{", '"q": 1', '{"z": [1, 2]}', "[1]"]
    assert [c["index"] for c in chunk.tool_call_chunks] == [0, 0, 1, 2]
    assert chunk.tool_calls == FIDELITY[2].tool_calls  # type: ignore[attr-defined]
    assert chunk.invalid_tool_calls == FIDELITY[2].invalid_tool_calls  # type: ignore[attr-defined]
    assert [t["args"] for t in chunk.invalid_tool_calls] == ['"q": 1', "[1]"]
    human = codec.decode(codec.encode(FIDELITY[6]))
    assert human.example is True and human.name == "ann"
    ai = codec.decode(codec.encode(FIDELITY[0]))
    assert isinstance(ai, AIMessage) and ai.example is True
    assert ai.invalid_tool_calls[0]["error"] == "bad args" and ai.usage_metadata == USAGE


def test_streamed_chunks_merge_the_same_after_reading_back() -> None:
    """Chunks read back still add up to the message the stream gave (the partial args join)."""
    parts = [
        AIMessageChunk("", id="m", tool_call_chunks=[{"id": "c", "name": "search", "args": "{", "index": 0}]),
        AIMessageChunk("", id="m", tool_call_chunks=[{"id": None, "name": None, "args": '"q": "x"}', "index": 0}]),
    ]
    codec = CheckpointStateCodec()
    back = [codec.decode(codec.encode(p)) for p in parts]
    merged = back[0] + back[1]
    assert merged == parts[0] + parts[1]
    assert merged.tool_calls == [{"id": "c", "name": "search", "args": {"q": "x"}, "type": "tool_call"}]


def test_saver_keeps_every_field_jsonplus_keeps(tmp_path: Path) -> None:
    """Stored by one saver (as state and as a pending write), read by a fresh one: equal messages."""
    saver = JsonlCheckpointSaver(tmp_path)
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": list(FIDELITY)}
    cp["channel_versions"] = {"messages": saver.get_next_version(None, None)}
    cfg: RunnableConfig = {"configurable": {"thread_id": "msgs", "checkpoint_ns": ""}}
    stored = saver.put(cfg, cp, {"source": "input", "step": -1}, cp["channel_versions"])
    saver.put_writes(stored, [("messages", list(FIDELITY))], "task-1")
    got = JsonlCheckpointSaver(tmp_path).get_tuple(stored)
    assert got is not None
    values = got.checkpoint["channel_values"]["messages"]
    assert values == FIDELITY and values == [_jsonplus(m) for m in FIDELITY]
    assert [type(m) for m in values] == [type(m) for m in FIDELITY]
    assert got.pending_writes == [("task-1", "messages", FIDELITY)]


def test_dtos_written_before_chunks_and_extras_still_read() -> None:
    """A chunk DTO holding only `tool_calls` (the older form) reads back as it did."""
    old = {
        "role": "ai",
        "chunk": True,
        "content": "par",
        "id": "k1",
        "tool_calls": [{"id": "c", "name": "g", "args": {"a": 1}}],
    }
    msg = dto_to_message(old)
    assert isinstance(msg, AIMessageChunk)
    assert msg.tool_call_chunks == [{"id": "c", "name": "g", "args": '{"a": 1}', "index": 0, "type": "tool_call_chunk"}]
    assert msg.tool_calls == [{"id": "c", "name": "g", "args": {"a": 1}, "type": "tool_call"}]
    assert dto_to_message({"role": "user", "content": "hi", "id": "h"}) == HumanMessage("hi", id="h")


def test_non_json_extra_attribute_is_refused_at_encode() -> None:
    """An extra attribute that is not JSON fails clearly instead of being dropped."""
    with pytest.raises(UnsupportedValueError, match="extra"):
        message_to_dto(HumanMessage("x", example=object()))
