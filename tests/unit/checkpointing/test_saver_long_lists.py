"""A long plain message list put again and again: what reads back is what was put last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

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
