"""What the runtime's checks read of a chat message, without LangChain.

`MessageView` is a message as the tool-call pairing rule and the doctor see it: its LangChain
`type`, whether it is an AI message (with the ids of its tool calls) or a tool result (with the
call it answers), and its `additional_kwargs`. `agent.loop.tool_pairs.view_of` makes one of a
LangChain message; the doctor makes them of the messages a checkpoint stores (their DTOs), so it
can judge a session without loading LangChain.

`check_tool_pairs` is the pairing rule itself (`assert_tool_pairs` applies it to LangChain
messages): OpenAI-style chat APIs reject a history with a tool call lacking its result, or a
result whose call is not in the AI message just before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agent.core.errors import AgentrtError

ARCHIVED_KEY = "agentrt_archived"
"""The `additional_kwargs` marker of a pointer / placeholder ToolMessage (compression archived its result)."""


class ToolPairingError(AgentrtError, ValueError):
    """A tool call without its result, or a result without its call: the model would reject it."""


class MessageKind(StrEnum):
    """What the pairing rule tells apart."""

    AI = "ai"
    """An AIMessage (or chunk): it may call tools."""
    TOOL = "tool"
    """A ToolMessage (or chunk): the result of one call."""
    OTHER = "other"
    """Any other message."""


@dataclass(frozen=True)
class MessageView:
    """One message as the checks read it (see the module doc)."""

    type: str
    """LangChain's `message.type` ("human", "ai", "tool", "AIMessageChunk", ...)."""
    kind: MessageKind
    tool_call_id: str = ""
    """The call a tool result answers."""
    call_ids: tuple[str | None, ...] = ()
    """The id of each tool call of an AI message (None: a call without one)."""
    invalid_call_ids: tuple[str | None, ...] = ()
    """The id of each invalid tool call of an AI message (answering one is allowed, not required)."""
    additional_kwargs: Mapping[str, Any] = field(default_factory=dict)
    is_message: bool = True
    """False for a value of the messages list that is no chat message."""


def check_tool_pairs(messages: Sequence[MessageView], allow_pending_tail: bool = False) -> None:
    """Raise ToolPairingError unless every AI tool call is answered right after it, and only once.

    `allow_pending_tail` accepts a last AI message whose calls have not been executed yet.
    """
    pending: list[str] = []
    allowed: set[str] = set()
    for i, msg in enumerate(messages):
        if msg.kind is MessageKind.TOOL:
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
        if msg.kind is MessageKind.AI:
            required = [tc_id for tc_id in msg.call_ids if tc_id]
            pending, allowed = list(required), set(required) | {tc_id for tc_id in msg.invalid_call_ids if tc_id}
    if pending and not allow_pending_tail:
        raise ToolPairingError(f"tool call(s) {pending} at the end have no result")
