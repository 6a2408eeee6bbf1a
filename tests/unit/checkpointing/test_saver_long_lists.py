"""A long plain message list put again and again: what reads back is what was put last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from checkpointing.exceptions import StaleFencingTokenError
from checkpointing.saver import JsonlCheckpointSaver


def _put(saver: JsonlCheckpointSaver, cfg: RunnableConfig, n: int, messages: list[Any]) -> RunnableConfig:
    cp = empty_checkpoint()
    cp["id"] = f"1f0-{n:06d}"
    cp["channel_values"] = {"messages": list(messages)}
    cp["channel_versions"] = {"messages": str(n)}
    return saver.put(cfg, cp, {"source": "loop", "step": n}, {"messages": str(n)})


def _history(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        out.append(AIMessage(f"step {i}", id=f"a{i}", tool_calls=[{"id": f"c{i}", "name": "t", "args": {}}]))
        out.append(ToolMessage(f"result {i} " + "x" * 200, id=f"t{i}", tool_call_id=f"c{i}"))
    return out


def test_a_message_edited_in_place_between_puts_reads_back_edited(tmp_path: Path) -> None:
    """The same message objects put again are not encoded again, unless a field was reassigned."""
    saver = JsonlCheckpointSaver(tmp_path)
    cfg: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    messages = _history(150)  # several full chunks
    cfg = _put(saver, cfg, 1, messages)
    cfg = _put(saver, cfg, 2, messages)
    messages[3].content = "edited result"  # the same object, one field reassigned
    messages.append(AIMessage("done", id="end"))
    cfg = _put(saver, cfg, 3, messages)
    for reader in (saver, JsonlCheckpointSaver(tmp_path)):
        got = reader.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        assert got is not None
        values = got.checkpoint["channel_values"]["messages"]
        assert [m.content for m in values] == [m.content for m in messages]
        assert values[3].content == "edited result"
    first = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "1f0-000001"}})
    assert first is not None
    assert first.checkpoint["channel_values"]["messages"][3].content.startswith("result 1 ")


def _latest(saver: JsonlCheckpointSaver, checkpoint_id: str | None = None) -> list[Any]:
    conf: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    got = saver.get_tuple({"configurable": conf})
    assert got is not None
    return list(got.checkpoint["channel_values"]["messages"])


def test_a_list_that_grew_replaced_one_message_or_shrank_reads_back_as_put(tmp_path: Path) -> None:
    """Each put's list reads back as put, whatever changed against the channel's previous list."""
    saver = JsonlCheckpointSaver(tmp_path)
    cfg: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    messages = _history(100)
    cfg = _put(saver, cfg, 1, messages)
    messages += _history(101)[-2:]  # grew
    cfg = _put(saver, cfg, 2, messages)
    messages[150] = AIMessage("replaced", id=messages[150].id)  # another object in the middle
    cfg = _put(saver, cfg, 3, messages)
    messages[7].additional_kwargs = {"note": "new dict"}  # a field of an earlier message reassigned
    cfg = _put(saver, cfg, 4, messages)
    shorter = messages[:90]  # a fork from an older state
    cfg = _put(saver, cfg, 5, shorter)
    messages.append(AIMessage("after the fork", id="late"))
    cfg = _put(saver, cfg, 6, messages)
    for reader in (saver, JsonlCheckpointSaver(tmp_path)):
        assert [m.model_dump() for m in _latest(reader)] == [m.model_dump() for m in messages]
        fork = _latest(reader, "1f0-000005")
        assert [m.model_dump() for m in fork] == [m.model_dump() for m in shorter]
        at3 = _latest(reader, "1f0-000003")
        assert at3[150].content == "replaced" and at3[7].additional_kwargs == {}
        assert _latest(reader, "1f0-000004")[7].additional_kwargs == {"note": "new dict"}


def test_a_put_refused_before_its_append_leaves_nothing_the_next_put_relies_on(tmp_path: Path) -> None:
    """A put refused after its record was built (a stale lease) stores nothing; the next put of the
    same list stores the messages that put would have stored."""
    saver = JsonlCheckpointSaver(tmp_path)
    conf: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": "", "fencing_token": 1}
    messages = _history(80)
    cfg = _put(saver, {"configurable": conf}, 1, messages)
    saver.store.session("default", "t", "always").advance_fence(2)
    messages += [AIMessage("only in the refused put " + "y" * 300, id="x1")]
    with pytest.raises(StaleFencingTokenError):
        _put(saver, {"configurable": {**cfg["configurable"], "fencing_token": 1}}, 2, messages)
    _put(saver, {"configurable": {**cfg["configurable"], "fencing_token": 2}}, 3, messages)
    for reader in (saver, JsonlCheckpointSaver(tmp_path)):
        assert [m.model_dump() for m in _latest(reader)] == [m.model_dump() for m in messages]
