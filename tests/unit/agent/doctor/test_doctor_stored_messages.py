"""The doctor's reading of stored messages without LangChain matches what LangGraph rebuilds.

`agent.doctor.light` folds a `messages` channel's stored DTOs with `merge_messages`' rules and
reads each as a `MessageView`; here the same writes go through the real reducer on LangChain
messages, and both give the same views. What it cannot mirror exactly asks for LangGraph.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from agent.doctor.light import REMOVE_ALL, merged, view_of_stored
from agent.loop.message_view import ARCHIVED_KEY
from agent.loop.tool_pairs import view_of
from checkpointing.messages import message_to_dto
from checkpointing.tail import NeedsGraph, StoredMessage
from graph.state import merge_messages


def _ai(mid: str, *calls: str) -> AIMessage:
    return AIMessage("", id=mid, tool_calls=[{"id": c, "name": "calculator", "args": {"x": 1}} for c in calls])


def _tool(mid: str, call: str, archived: bool = False) -> ToolMessage:
    return ToolMessage("42", id=mid, tool_call_id=call, additional_kwargs={ARCHIVED_KEY: {}} if archived else {})


SEED = [SystemMessage("sys", id="s"), HumanMessage("hi", id="h")]
WRITES: dict[str, list[Any]] = {
    "appended": [[_ai("a1", "c1", "c2")], [_tool("t1", "c1"), _tool("t2", "c2")], _ai("a2")],
    "replaced": [[_ai("a1", "c1")], [_tool("t1", "c1")], [_tool("t1", "c1", archived=True)]],
    "removed": [[_ai("a1")], RemoveMessage(id="h"), [HumanMessage("again", id="h2")]],
    "all removed": [[_ai("a1")], [RemoveMessage(id=REMOVE_ALL_MESSAGES), SystemMessage("summary", id="s2")]],
}


def _stored(value: Any) -> Any:
    if isinstance(value, list):
        return [_stored(v) for v in value]
    assert isinstance(value, BaseMessage)
    return StoredMessage(message_to_dto(value))


@pytest.mark.parametrize("case", sorted(WRITES))
def test_the_fold_gives_what_merge_messages_gives(case: str) -> None:
    """Appends, replacements by id, removals and a remove-all: the same messages, in order."""
    writes = WRITES[case]
    expected = [view_of(m) for m in merge_messages(list(SEED), writes)]
    got = [view_of_stored(m) for m in merged(_stored(SEED), _stored(writes))]
    assert got == expected


def test_remove_all_is_langgraphs_id() -> None:
    """The id of the removal that drops the whole context is LangGraph's."""
    assert REMOVE_ALL == REMOVE_ALL_MESSAGES


@pytest.mark.parametrize(
    "write",
    [
        HumanMessage("no id"),  # merge_messages makes up its id
        RemoveMessage(id="nobody"),  # merge_messages refuses it
        AIMessageChunk("part", id="k"),  # merge_messages converts it
    ],
)
def test_what_the_fold_cannot_mirror_asks_langgraph(write: BaseMessage) -> None:
    """Rather than guess, the doctor runs again with LangGraph."""
    with pytest.raises(NeedsGraph):
        merged(_stored(SEED), [_stored(write)])


def test_tool_calls_langchain_parses_from_kwargs_ask_langgraph() -> None:
    """An AI message whose tool calls LangChain would parse out of `additional_kwargs`."""
    dto = {"role": "ai", "content": "", "id": "a", "additional_kwargs": {"tool_calls": [{"id": "c"}]}}
    with pytest.raises(NeedsGraph):
        view_of_stored(StoredMessage(dto))
