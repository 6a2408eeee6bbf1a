"""A long text held by a tool message and by another record is stored once, and reads back everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint

from checkpointing.saver import JsonlCheckpointSaver


def test_a_tool_result_in_two_channels_is_stored_once(tmp_path: Path) -> None:
    """The ToolMessage content and a tool-result record's content share one stored copy; both read back."""
    saver = JsonlCheckpointSaver(tmp_path, keep_last=1)
    result = "lorem ipsum dolor sit amet " * 200  # 5.4 KB
    ai = AIMessage("calling", id="a1", tool_calls=[{"id": "c1", "name": "search", "args": {}}])
    values = {
        "messages": [ai, ToolMessage(result, tool_call_id="c1", id="t1")],
        "tool_result_store": [{"tool_call_id": "c1", "content": result, "size": len(result)}],
    }
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = {"messages": "1", "tool_result_store": "1"}
    cfg = saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {"messages": "1", "tool_result_store": "1"}
    )
    log = tmp_path / "tenants/default/sessions/t/runs/main/checkpoints.jsonl"
    assert log.read_text().count("lorem ipsum dolor sit amet") == 200
    for reader in (saver, JsonlCheckpointSaver(tmp_path)):
        got = reader.get_tuple(cfg)
        assert got is not None and got.checkpoint["channel_values"] == values
    # Retention rewrites the file: what a kept checkpoint references (texts included) stays.
    for i in range(2, 5):
        nxt = empty_checkpoint()
        nxt["channel_values"] = values
        nxt["channel_versions"] = {"messages": "1", "tool_result_store": "1"}
        cfg = saver.put(cfg, nxt, {"step": i}, {})
    saver.retain(cfg)
    got = JsonlCheckpointSaver(tmp_path).get_tuple(cfg)
    assert got is not None and got.checkpoint["channel_values"] == values


def test_a_schema_2_log_still_reads(tmp_path: Path) -> None:
    """A run log written by schema 2 (task_state as [version, home] pairs) reads back the same values."""
    import orjson

    from checkpointing.records import frame, read_records

    saver = JsonlCheckpointSaver(tmp_path)
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [AIMessage("short", id="a1")], "count": 3}
    cp["channel_versions"] = {"messages": "1", "count": "1"}
    cfg = saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {"step": 1}, {"messages": "1", "count": "1"}
    )
    log = tmp_path / "tenants/default/sessions/t/runs/main/checkpoints.jsonl"
    old = []
    for rec in read_records(log):
        rec["schema_version"] = 2
        if rec["k"] == "c":  # schema 2: [version, home] pairs, one [task, idx] pair per write
            homes = rec.pop("homes")
            rec["task_state"] = {ch: [rec["channel_versions"][ch], homes[i]] for ch, i in rec["task_state"].items()}
            rec["parent_writes"] = [[w[0], i] for w in rec["parent_writes"] for i in w[1:]]
        old.append(frame(orjson.dumps(rec)))
    log.write_bytes(b"".join(old))
    got = JsonlCheckpointSaver(tmp_path).get_tuple(cfg)
    assert got is not None and got.checkpoint["channel_values"] == cp["channel_values"]
    assert got.metadata["step"] == 1


def test_a_schema_3_log_still_reads_and_schema_4_is_smaller(tmp_path: Path) -> None:
    """A run log written by schema 3 (task_state as {channel: home}, a [task, idx] pair per write)
    reads back the same history; schema 4 writes each home and each task id once per record."""
    import orjson

    from checkpointing.records import frame, read_records

    saver = JsonlCheckpointSaver(tmp_path)
    cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for step in range(3):
        cp = empty_checkpoint()
        cp["channel_values"] = {"a": step, "b": "same", "c": "same"}
        cp["channel_versions"] = {"a": str(step + 1), "b": "1", "c": "1"}
        cfg = saver.put(cfg, cp, {"step": step}, {"a": str(step + 1)} if step else dict(cp["channel_versions"]))
        saver.put_writes(cfg, [("a", step), ("b", "same"), ("c", "same")], "task-1")
    log = tmp_path / "tenants/default/sessions/t/runs/main/checkpoints.jsonl"
    new_form = log.read_bytes()
    thread = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    want = [(t.checkpoint["channel_values"], t.metadata["step"]) for t in saver.list(thread)]
    old = []
    for rec in read_records(log):
        if rec["k"] == "c":
            rec["schema_version"] = 3
            homes = rec.pop("homes")
            rec["task_state"] = {ch: homes[i] for ch, i in rec["task_state"].items()}
            rec["parent_writes"] = [[w[0], i] for w in rec["parent_writes"] for i in w[1:]]
        old.append(frame(orjson.dumps(rec)))
    log.write_bytes(b"".join(old))
    assert len(new_form) < len(b"".join(old))
    got = [(t.checkpoint["channel_values"], t.metadata["step"]) for t in JsonlCheckpointSaver(tmp_path).list(thread)]
    assert got == want and [s for _, s in got] == [2, 1, 0]
