"""A message whose id LangGraph assigns while a put is encoding it (`add_messages` sets ids in
place, in the loop's thread, while an async-durability put encodes the same object in another)
is stored with its id by the next put: neither encoding memo keeps the stale stored form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint

from checkpointing.saver import JsonlCheckpointSaver


class _AssignsIdsMeanwhile:
    """The saver's codec, with LangGraph's other thread emulated: right after a message without an
    id is encoded, its id is assigned (the moment the race lets it land)."""

    def __init__(self, codec: Any) -> None:
        self._codec = codec

    def encode(self, value: Any, *args: Any, **kwargs: Any) -> Any:
        out = self._codec.encode(value, *args, **kwargs)
        if isinstance(value, ToolMessage) and value.id is None:
            value.id = "assigned-meanwhile"
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._codec, name)


def _put(saver: JsonlCheckpointSaver, messages: list[Any], parent: Any, version: str) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": list(messages)}
    cp["channel_versions"] = {"messages": version}
    config = parent or {"configurable": {"thread_id": "t", "checkpoint_ns": "", "tenant_id": "acme"}}
    return saver.put(config, cp, {}, {"messages": version})


def test_an_id_assigned_while_a_put_encodes_the_message_is_stored_by_the_next_put(tmp_path: Path) -> None:
    saver = JsonlCheckpointSaver(tmp_path)
    saver.docs.spiller.codec = _AssignsIdsMeanwhile(saver.docs.spiller.codec)  # type: ignore[assignment]
    first = HumanMessage("go " * 100, id="h0")
    result = ToolMessage("result " * 100, tool_call_id="c1")  # no id yet, long enough to be an item
    one = _put(saver, [first, result], None, "1")
    assert result.id == "assigned-meanwhile"
    two = _put(saver, [first, result], one, "2")
    three = _put(saver, [first, result, ToolMessage("more " * 100, tool_call_id="c2", id="t2")], two, "3")
    fresh = JsonlCheckpointSaver(tmp_path)
    for config, n in ((two, 2), (three, 3)):
        got = fresh.get_tuple(config)
        assert got is not None
        msgs = got.checkpoint["channel_values"]["messages"]
        assert len(msgs) == n and msgs[1].id == "assigned-meanwhile", (n, [m.id for m in msgs])
