"""Tool-call pairing: an AI message's tool calls must be answered by ToolMessages right after it.

OpenAI-style chat APIs reject a history with a tool call lacking its result, or a result whose
call is not in the AI message just before it. Compression cuts only between `split_units`
units, and `assert_tool_pairs` checks the invariant (tests and the memory node use it).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agent.errors import AgentrtError


class ToolPairingError(AgentrtError, ValueError):
    """A tool call without its result, or a result without its call: the model would reject it."""


def _call_ids(msg: AIMessage) -> tuple[list[str], set[str]]:
    required = [tc_id for tc in msg.tool_calls if (tc_id := tc.get("id"))]
    optional = {tc_id for tc in msg.invalid_tool_calls if (tc_id := tc.get("id"))}
    return required, optional


def assert_tool_pairs(messages: Sequence[BaseMessage], allow_pending_tail: bool = False) -> None:
    """Raise ToolPairingError unless every AI tool call is answered right after it, and only once.

    `allow_pending_tail` accepts a last AI message whose calls have not been executed yet.
    """
    pending: list[str] = []
    allowed: set[str] = set()
    for i, msg in enumerate(messages):
        if isinstance(msg, ToolMessage):
            if msg.tool_call_id not in allowed:
                raise ToolPairingError(
                    f"message {i} is a tool result for {msg.tool_call_id!r} that does not follow the AI "
                    "message calling it (orphan or duplicate); compression must keep pairs whole"
                )
            allowed.discard(msg.tool_call_id)
            if msg.tool_call_id in pending:
                pending.remove(msg.tool_call_id)
            continue
        if pending:
            raise ToolPairingError(
                f"tool call(s) {pending} have no result before message {i}; "
                "every tool call needs its ToolMessage right after the AI message"
            )
        pending, allowed = [], set()
        if isinstance(msg, AIMessage):
            required, optional = _call_ids(msg)
            pending, allowed = list(required), set(required) | optional
    if pending and not allow_pending_tail:
        raise ToolPairingError(f"tool call(s) {pending} at the end have no result")


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
