"""Tool-call pairing: an AI message's tool calls must be answered by ToolMessages right after it.

OpenAI-style chat APIs reject a history with a tool call lacking its result, or a result whose
call is not in the AI message just before it. Compression cuts only between `split_units`
units, and `assert_tool_pairs` checks the invariant (tests and the memory node use it) with the
rule of `agent.loop.message_view`, which the doctor applies to stored messages too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agent.loop.message_view import MessageKind, MessageView, check_tool_pairs
from agent.loop.message_view import ToolPairingError as ToolPairingError  # re-exported


def _call_ids(msg: AIMessage) -> tuple[list[str], set[str]]:
    required = [tc_id for tc in msg.tool_calls if (tc_id := tc.get("id"))]
    optional = {tc_id for tc in msg.invalid_tool_calls if (tc_id := tc.get("id"))}
    return required, optional


def view_of(msg: Any) -> MessageView:
    """What the pairing rule and the doctor read of a LangChain message (`MessageView`)."""
    if isinstance(msg, ToolMessage):
        return MessageView(
            msg.type, MessageKind.TOOL, tool_call_id=msg.tool_call_id, additional_kwargs=msg.additional_kwargs
        )
    if isinstance(msg, AIMessage):
        return MessageView(
            msg.type,
            MessageKind.AI,
            call_ids=tuple(tc.get("id") for tc in msg.tool_calls),
            invalid_call_ids=tuple(tc.get("id") for tc in msg.invalid_tool_calls),
            additional_kwargs=msg.additional_kwargs,
        )
    if isinstance(msg, BaseMessage):
        return MessageView(msg.type, MessageKind.OTHER, additional_kwargs=msg.additional_kwargs)
    return MessageView(type(msg).__name__, MessageKind.OTHER, is_message=False)


def assert_tool_pairs(messages: Sequence[BaseMessage], allow_pending_tail: bool = False) -> None:
    """Raise ToolPairingError unless every AI tool call is answered right after it, and only once
    (`agent.loop.message_view.check_tool_pairs`).

    `allow_pending_tail` accepts a last AI message whose calls have not been executed yet.
    """
    check_tool_pairs([view_of(m) for m in messages], allow_pending_tail)


def split_units(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """Group messages into units a cut may not split: AI-with-tool-calls + its results; else one message."""
    units: list[list[BaseMessage]] = []
    open_ids: set[str] = set()
    for msg in messages:
        if isinstance(msg, ToolMessage) and units and msg.tool_call_id in open_ids:
            units[-1].append(msg)
            open_ids.discard(msg.tool_call_id)
            continue
        units.append([msg])
        open_ids = set()
        if isinstance(msg, AIMessage):
            required, optional = _call_ids(msg)
            open_ids = set(required) | optional
    return units
