"""Canonical message DTOs: LangChain messages as plain JSON, and back, losslessly.

A DTO is a dict with `role` in {system, user, ai, tool, chat, function, remove} and the
fields that role carries: `content`, `id`, `name`, `tool_calls` (ai: `[{id, name, args}]`),
`invalid_tool_calls`, `tool_call_chunks` (ai chunks: `[{id, name, args, index}]`, the args text
as streamed, partial JSON included), `usage` (ai: input/output/total tokens and details),
`tool_call_id`, `status` and `artifact` (tool), `chat_role` (chat), `additional_kwargs`,
`response_metadata`, `extra` (the message's extra attributes, such as `example=True`), and
`chunk: true` for streaming chunks. Fields at their default are omitted, so the DTO of a plain
message stays small. Every field LangGraph's JsonPlusSerializer keeps survives the round trip;
values must be JSON. Decoding accepts only these roles: nothing is ever built from a type name
read from data. DTOs written before `tool_call_chunks` and `extra` existed still read as before.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call, tool_call_chunk

from checkpointing.exceptions import UnsupportedValueError

MessageDTO = dict[str, Any]

_ROLE_OF: dict[type[BaseMessage], tuple[str, bool]] = {
    SystemMessage: ("system", False),
    SystemMessageChunk: ("system", True),
    HumanMessage: ("user", False),
    HumanMessageChunk: ("user", True),
    AIMessage: ("ai", False),
    AIMessageChunk: ("ai", True),
    ToolMessage: ("tool", False),
    ToolMessageChunk: ("tool", True),
    ChatMessage: ("chat", False),
    ChatMessageChunk: ("chat", True),
    FunctionMessage: ("function", False),
    FunctionMessageChunk: ("function", True),
    RemoveMessage: ("remove", False),
}
_CLASS_OF: dict[tuple[str, bool], type[BaseMessage]] = {v: k for k, v in _ROLE_OF.items()}


def _json_safe(value: Any, where: str) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise UnsupportedValueError(f"message field {where} is not JSON-serializable: {err}") from err
    return value


def is_canonical_message(msg: BaseMessage) -> bool:
    """Whether `msg` is exactly one of the message classes a DTO describes (not a subclass)."""
    return type(msg) in _ROLE_OF


def message_to_dto(msg: BaseMessage) -> MessageDTO:
    """Convert a LangChain message into its canonical DTO (plain JSON)."""
    try:
        role, chunk = _ROLE_OF[type(msg)]
    except KeyError as err:
        raise UnsupportedValueError(f"unsupported message class {type(msg).__name__}") from err
    dto: MessageDTO = {"role": role}
    if role != "remove":
        dto["content"] = _json_safe(msg.content, "content")
    if chunk:
        dto["chunk"] = True
    if msg.id is not None:
        dto["id"] = msg.id
    if msg.name is not None:
        dto["name"] = msg.name
    if msg.additional_kwargs:
        dto["additional_kwargs"] = _json_safe(msg.additional_kwargs, "additional_kwargs")
    if msg.response_metadata:
        dto["response_metadata"] = _json_safe(msg.response_metadata, "response_metadata")
    if msg.__pydantic_extra__:
        dto["extra"] = _json_safe(dict(msg.__pydantic_extra__), "extra")
    if isinstance(msg, AIMessage):
        _ai_fields(msg, dto)
    elif isinstance(msg, ToolMessage):
        dto["tool_call_id"] = msg.tool_call_id
        if msg.status != "success":
            dto["status"] = msg.status
        if msg.artifact is not None:
            dto["artifact"] = _json_safe(msg.artifact, "artifact")
    elif isinstance(msg, ChatMessage):
        dto["chat_role"] = msg.role
    return dto


def _ai_fields(msg: AIMessage, dto: MessageDTO) -> None:
    if msg.tool_calls:
        dto["tool_calls"] = [
            {"id": tc.get("id"), "name": tc["name"], "args": _json_safe(tc["args"], "tool_calls")}
            for tc in msg.tool_calls
        ]
    if msg.invalid_tool_calls:
        dto["invalid_tool_calls"] = _json_safe([dict(t) for t in msg.invalid_tool_calls], "invalid_tool_calls")
    if msg.usage_metadata is not None:
        dto["usage"] = _json_safe(dict(msg.usage_metadata), "usage_metadata")
    if isinstance(msg, AIMessageChunk):
        if msg.chunk_position is not None:
            dto["chunk_position"] = msg.chunk_position
        # The chunks as streamed (LangChain derives tool_calls from them, so '{' would read back
        # as '{}' if rebuilt from tool_calls). `tool_calls` stays beside them for older readers.
        if msg.tool_call_chunks or "tool_calls" in dto or "invalid_tool_calls" in dto:
            dto["tool_call_chunks"] = _json_safe(
                [
                    {"id": c.get("id"), "name": c.get("name"), "args": c.get("args"), "index": c.get("index")}
                    for c in msg.tool_call_chunks
                ],
                "tool_call_chunks",
            )


def dto_to_message(dto: MessageDTO) -> BaseMessage:
    """Rebuild the LangChain message a DTO describes (closed set of roles)."""
    if not isinstance(dto, dict):
        raise UnsupportedValueError(f"message DTO must be an object, got {type(dto).__name__}")
    key = (dto.get("role"), bool(dto.get("chunk", False)))
    cls = _CLASS_OF.get(key)  # type: ignore[arg-type]
    if cls is None:
        raise UnsupportedValueError(f"unknown message role {dto.get('role')!r}")
    kwargs: dict[str, Any] = {} if cls is RemoveMessage else {"content": dto.get("content", "")}
    for field in ("id", "name", "additional_kwargs", "response_metadata"):
        if field in dto:
            kwargs[field] = dto[field]
    extra = dto.get("extra")
    if isinstance(extra, dict):
        kwargs.update((k, v) for k, v in extra.items() if k not in cls.model_fields and k not in kwargs)
    if cls is RemoveMessage:
        return RemoveMessage(**kwargs)
    if issubclass(cls, AIMessageChunk) and "tool_call_chunks" in dto:
        return _ai_chunk(dto, kwargs)
    if issubclass(cls, AIMessage):
        kwargs["tool_calls"] = [
            {"id": tc.get("id"), "name": tc["name"], "args": tc.get("args", {}), "type": "tool_call"}
            for tc in dto.get("tool_calls", [])
        ]
        if "invalid_tool_calls" in dto:
            kwargs["invalid_tool_calls"] = dto["invalid_tool_calls"]
        if "usage" in dto:
            kwargs["usage_metadata"] = dto["usage"]
        if "chunk_position" in dto:
            kwargs["chunk_position"] = dto["chunk_position"]
        if issubclass(cls, AIMessageChunk):
            # A DTO from before `tool_call_chunks`: chunks rebuilt from tool_calls, as it was read then.
            kwargs["tool_call_chunks"] = [
                {
                    "id": tc.get("id"),
                    "name": tc["name"],
                    "args": json.dumps(tc.get("args", {})),
                    "index": i,
                    "type": "tool_call_chunk",
                }
                for i, tc in enumerate(dto.get("tool_calls", []))
            ]
            del kwargs["tool_calls"]
    elif issubclass(cls, ToolMessage):
        kwargs["tool_call_id"] = dto["tool_call_id"]
        if "status" in dto:
            kwargs["status"] = dto["status"]
        if "artifact" in dto:
            kwargs["artifact"] = dto["artifact"]
    elif issubclass(cls, ChatMessage):
        kwargs["role"] = dto["chat_role"]
    return cls(**kwargs)


def _ai_chunk(dto: MessageDTO, kwargs: dict[str, Any]) -> AIMessageChunk:
    """An AIMessageChunk from its streamed tool-call chunks, with the tool calls it was stored with."""
    chunks = [
        tool_call_chunk(name=c.get("name"), args=c.get("args"), id=c.get("id"), index=c.get("index"))
        for c in dto["tool_call_chunks"]
    ]
    if "usage" in dto:
        kwargs["usage_metadata"] = dto["usage"]
    if "chunk_position" in dto:
        kwargs["chunk_position"] = dto["chunk_position"]
    msg = AIMessageChunk(**kwargs, tool_call_chunks=chunks)
    # LangChain re-derives tool_calls from the chunks; the stored ones are what the message held.
    msg.tool_calls = [
        tool_call(name=tc["name"], args=tc.get("args", {}), id=tc.get("id")) for tc in dto.get("tool_calls", [])
    ]
    msg.invalid_tool_calls = [
        invalid_tool_call(name=t.get("name"), args=t.get("args"), id=t.get("id"), error=t.get("error"))
        for t in dto.get("invalid_tool_calls", [])
    ]
    return msg


def messages_to_dtos(messages: list[BaseMessage]) -> list[MessageDTO]:
    """Convert a list of messages to DTOs."""
    return [message_to_dto(m) for m in messages]


def dtos_to_messages(dtos: list[MessageDTO]) -> list[BaseMessage]:
    """Convert a list of DTOs back to messages."""
    return [dto_to_message(d) for d in dtos]
