"""Reads decode each stored message once per session, yet every read hands out its own objects."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from checkpointing.saver import JsonlCheckpointSaver


def test_changing_a_read_message_never_changes_the_next_read(tmp_path: Path) -> None:
    """A caller that edits what it read (tool calls, kwargs, extras, id) sees the stored value on the next read."""
    saver = JsonlCheckpointSaver(tmp_path)
    ai = AIMessage(
        "calling",
        id="a1",
        tool_calls=[{"id": "c1", "name": "search", "args": {"q": "x", "opts": {"n": 1}}}],
        additional_kwargs={"k": [1, 2]},
        labels={"seen": ["u1"]},
    )
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [HumanMessage("hi " * 40, id="h"), ai]}
    cp["channel_versions"] = {"messages": "1"}
    cfg = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {"messages": "1"})
    first = saver.get_tuple(cfg)
    assert first is not None
    got = first.checkpoint["channel_values"]["messages"][1]
    assert got == ai
    got.tool_calls[0]["args"]["opts"]["n"] = 99
    got.additional_kwargs["k"].append(3)
    got.labels["seen"].append("u2")
    got.id = "changed"
    again = saver.get_tuple(cfg)
    assert again is not None
    assert again.checkpoint["channel_values"]["messages"][1] == ai
    assert again.checkpoint["channel_values"]["messages"][1] is not got
    fresh = JsonlCheckpointSaver(tmp_path).get_tuple(cfg)
    assert fresh is not None and fresh.checkpoint["channel_values"] == again.checkpoint["channel_values"]


def test_filling_an_empty_field_of_a_read_message_never_changes_the_next_read(tmp_path: Path) -> None:
    """Empty dicts and lists (kwargs, tool calls) are a read's own too, not the cached message's."""
    saver = JsonlCheckpointSaver(tmp_path)
    ai = AIMessage("plain " * 40, id="a2")
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [ai]}
    cp["channel_versions"] = {"messages": "1"}
    cfg = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {"messages": "1"})
    first = saver.get_tuple(cfg)
    assert first is not None
    got = first.checkpoint["channel_values"]["messages"][0]
    got.additional_kwargs["k"] = 1
    got.response_metadata["model"] = "m"
    got.tool_calls.append({"id": "c9", "name": "search", "args": {}, "type": "tool_call"})
    again = saver.get_tuple(cfg)
    assert again is not None and again.checkpoint["channel_values"]["messages"][0] == ai
