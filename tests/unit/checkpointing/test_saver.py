"""JsonlCheckpointSaver API: documents, references, writes, ids, validation, retention, blobs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from agent.core.errors import as_agentrt_error
from checkpointing import _saver_store
from checkpointing.exceptions import (
    DocumentMismatch,
    InvalidIdError,
    OldFormatError,
    UnknownSchemaError,
    UnsupportedValueError,
)
from checkpointing.records import encode_record
from checkpointing.saver import JsonlCheckpointSaver
from tests.support.savers import SaverKit

DOC_FIELDS = {
    "schema_version", "checkpoint_id", "parent_checkpoint_id", "tenant_id", "session_id", "run_id",
    "current_node", "next_nodes", "task_state", "channel_versions", "versions_seen", "parent_writes",
    "runtime_snapshot", "metadata", "created_at",
}  # fmt: skip


def _cfg(thread: str = "t1", cp: str | None = None, **extra: Any) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": "", **extra}
    if cp:
        conf["checkpoint_id"] = cp
    return {"configurable": conf}


def _checkpoint(values: dict[str, Any], versions: dict[str, Any], seen: dict[str, Any] | None = None) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    cp["versions_seen"] = seen or {}
    return cp


def _chain(saver: JsonlCheckpointSaver, n: int, thread: str = "t1", **extra: Any) -> list[Any]:
    """n checkpoints with a growing message list and a counter; returns the stored configs."""
    stored: list[Any] = []
    msgs: list[Any] = []
    parent: str | None = None
    for i in range(n):
        msgs = [*msgs, HumanMessage(f"m{i}", id=f"id{i}")]
        cp = _checkpoint({"messages": msgs, "count": i}, {"messages": i + 1, "count": i + 1})
        cfg = _cfg(thread, parent, **extra)
        saved = saver.put(cfg, cp, {"source": "loop", "step": i}, {"messages": i + 1, "count": i + 1})
        stored.append(saved)
        parent = saved["configurable"]["checkpoint_id"]
    return stored


def test_read_back_equals_written_and_is_never_mutated(saver_kit: SaverKit) -> None:
    """What get_tuple returns equals what was put, even if the caller mutates either side later."""
    saver = saver_kit()
    values: dict[str, Any] = {"messages": [AIMessage("x", tool_calls=[{"id": "1", "name": "t", "args": {"a": [1]}}])],
              "data": {"k": [1, 2, {"n": None}], "t": (1, "a")}}  # fmt: skip
    cp = _checkpoint(values, {"messages": 1, "data": 1})
    expected = copy.deepcopy(cp)
    cfg = saver.put(_cfg(), cp, {"source": "input", "step": -1}, {"messages": 1, "data": 1})
    values["data"]["k"].append("mutated")
    cp["channel_values"]["messages"].append(HumanMessage("late"))
    got = saver.get_tuple(cfg)
    assert got is not None
    assert got.checkpoint["channel_values"] == expected["channel_values"]
    assert got.checkpoint["channel_versions"] == expected["channel_versions"]
    got.checkpoint["channel_values"]["data"]["k"].clear()
    again = saver_kit().get_tuple(cfg)
    assert again is not None and again.checkpoint["channel_values"] == expected["channel_values"]


def test_document_has_every_design_field_and_caller_pins_travel_in_metadata(saver_kit: SaverKit) -> None:
    """The stored document carries DESIGN §4 fields; a caller's pins and runtime snapshot ride in metadata."""
    saver = saver_kit()
    extra: dict[str, Any] = {"agent_id": "a1", "graph_version": "g7", "tenant_id": "acme"}
    snapshot = {"surface_digest": "sha256:s", "active_skill": "sql", "todo": ["x"]}
    seen = {"agent": {"branch:to:agent": 1}}
    # branch:to:tools holds a value (LangGraph writes None to trigger a node): tools runs next.
    cp = _checkpoint({"count": 1, "branch:to:tools": None}, {"count": 1, "branch:to:tools": 2}, seen)
    new = {"count": 1, "branch:to:tools": 2}
    cfg = saver.put(_cfg(**extra), cp, {"source": "loop", "step": 1, "runtime_snapshot": snapshot}, new)
    doc = saver.get_document({"configurable": {**cfg["configurable"], "tenant_id": "acme"}})
    assert doc is not None and set(doc) >= DOC_FIELDS
    assert (doc["tenant_id"], doc["session_id"], doc["run_id"]) == ("acme", "t1", "main")
    assert (doc["metadata"]["agent_id"], doc["metadata"]["graph_version"]) == ("a1", "g7")
    assert doc["runtime_snapshot"] == snapshot
    assert doc["next_nodes"] == ["tools"] and doc["current_node"] == "agent"
    assert doc["task_state"] == {"count": [1, cp["id"]], "branch:to:tools": [2, cp["id"]]}
    assert saver_kit.records(tenant="acme")[0]["checkpoint_id"] == cp["id"]
    assert cfg["configurable"]["tenant_id"] == "acme"  # returned configs keep the caller's tenant
    default = {k: v for k, v in cfg["configurable"].items() if k != "tenant_id"}
    assert saver.get_document({"configurable": default}) is None  # the default tenant has no such checkpoint


def test_values_are_stored_once_per_channel_version(saver_kit: SaverKit) -> None:
    """Only channels in new_versions are written; the others point at the record that holds them."""
    saver = saver_kit()
    cfgs = _chain(saver, 3)
    same = [HumanMessage(f"m{i}", id=f"id{i}") for i in range(3)]
    nxt = _checkpoint({"messages": same, "count": 9}, {"messages": 3, "count": 9})
    saver.put(_cfg("t1", cfgs[-1]["configurable"]["checkpoint_id"]), nxt, {}, {"count": 9})
    docs = saver_kit.records()
    assert set(docs[3]["values"]) == {"count"}
    # On disk (schema 4) a channel maps to its home (by index into `homes`); its version is the one
    # in channel_versions.
    assert docs[3]["homes"][docs[3]["task_state"]["messages"]] == docs[2]["checkpoint_id"]
    assert docs[3]["channel_versions"]["messages"] == 3
    got = saver.get_tuple(_cfg("t1"))
    assert got is not None and [m.content for m in got.checkpoint["channel_values"]["messages"]] == ["m0", "m1", "m2"]


def test_list_filters_on_metadata_copied_from_config(saver_kit: SaverKit) -> None:
    """graph_version passed in configurable lands in metadata and list(filter=...) finds it."""
    saver = saver_kit()
    _chain(saver, 2, graph_version="v1")
    _chain(saver, 3, graph_version="v2")
    found = list(saver.list(_cfg("t1"), filter={"graph_version": "v2"}))
    assert len(found) == 3 and all(dict(t.metadata)["graph_version"] == "v2" for t in found)
    assert len(list(saver.list(_cfg("t1"), limit=4))) == 4
    newest = list(saver.list(_cfg("t1")))
    ids = [t.checkpoint["id"] for t in newest]
    assert ids == sorted(ids, reverse=True)
    before = list(saver.list(_cfg("t1"), before={"configurable": {"checkpoint_id": ids[1]}}))
    assert [t.checkpoint["id"] for t in before] == ids[2:]


def test_put_writes_first_ordinary_wins_special_replaces(saver_kit: SaverKit) -> None:
    """A re-sent ordinary write is ignored; an __interrupt__ write replaces the earlier one."""
    saver = saver_kit()
    cfg = _chain(saver, 1)[0]
    saver.put_writes(cfg, [("a", 1), ("__interrupt__", "first")], "task1")
    saver.put_writes(cfg, [("a", 2), ("__interrupt__", "second")], "task1")
    saver.put_writes(cfg, [("a", 3)], "task2", task_path="p")
    got = saver_kit().get_tuple(cfg)
    assert got is not None
    expected = [("task1", "__interrupt__", "second"), ("task1", "a", 1), ("task2", "a", 3)]
    assert sorted(got.pending_writes or []) == expected


def test_unsupported_value_fails_at_put_and_writes_nothing(saver_kit: SaverKit) -> None:
    """An object the codec does not know raises UnsupportedValueError and leaves no record."""
    saver = saver_kit()
    with pytest.raises(UnsupportedValueError, match="cannot store"):
        saver.put(_cfg(), _checkpoint({"bad": object()}, {"bad": 1}), {}, {"bad": 1})
    assert saver.get_tuple(_cfg()) is None
    assert saver_kit.records() == []


@pytest.mark.parametrize("bad", ["..", "a/b", "/abs", "a\x00b", "x" * 300, "../../etc"])
@pytest.mark.parametrize("key", ["tenant_id", "run_id"])
def test_bad_ids_are_rejected_before_touching_disk(saver_kit: SaverKit, key: str, bad: str) -> None:
    """Tenant and run ids with '..', '/', NUL or 300 chars raise InvalidIdError and create nothing."""
    saver = saver_kit()
    conf: dict[str, Any] = {"thread_id": "ok", "checkpoint_ns": "", key: bad}
    with pytest.raises(InvalidIdError, match="invalid"):
        saver.put({"configurable": conf}, _checkpoint({}, {}), {}, {})
    assert not saver_kit.base.exists()
    assert saver_kit.store().threads() == []


@pytest.mark.parametrize("bad", ["..", "a/b", "/abs", "x" * 300, "../../etc", "with space"])
def test_any_thread_id_works_and_never_escapes_base_dir(saver_kit: SaverKit, tmp_path: Path, bad: str) -> None:
    """A thread id that is not a safe path part (LangGraph allows any) lives under a digest folder
    (files), or is stored as given (PostgreSQL: a bound parameter, never part of a statement)."""
    saver = saver_kit()
    cfg = saver.put(_cfg(bad), _checkpoint({"n": 1}, {"n": 1}), {}, {"n": 1})
    assert cfg["configurable"]["thread_id"] == bad
    if saver_kit.kind == "files":
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        assert files and all(p.is_relative_to(saver_kit.base / "tenants" / "default" / "sessions") for p in files)
    fresh = saver_kit()
    got = fresh.get_tuple(_cfg(bad))
    assert got is not None and got.config["configurable"]["thread_id"] == bad
    assert [t.config["configurable"]["thread_id"] for t in fresh.list(None)] == [bad]


def test_expected_metadata_mismatch_raises_on_load(saver_kit: SaverKit) -> None:
    """A saver told to expect a graph version reports DocumentMismatch instead of the checkpoint."""
    _chain(saver_kit(), 2, graph_version="g1")
    assert saver_kit(expect_metadata={"graph_version": "g1"}).get_tuple(_cfg()) is not None
    with pytest.raises(DocumentMismatch) as err:
        saver_kit(expect_metadata={"graph_version": "g2"}).get_tuple(_cfg())
    assert (err.value.step, err.value.expected, err.value.found) == ("validate_graph_version", "g2", "g1")

    def refuse(doc: dict[str, Any]) -> None:
        raise DocumentMismatch("validate_toolset", "toolset changed", "x", doc["metadata"].get("toolset_hash"))

    with pytest.raises(DocumentMismatch, match="toolset"):
        saver_kit(validate=refuse).get_tuple(_cfg())


def test_unknown_schema_version_raises_and_keeps_file(saver_kit: SaverKit) -> None:
    """A document with an unknown schema_version raises UnknownSchemaError; the file is untouched."""
    saver = saver_kit()
    _chain(saver, 1)
    doc = saver_kit.records()[0]
    doc.update(schema_version=99, checkpoint_id=str(uuid6(clock_seq=-1)))
    saver_kit.append_line(encode_record(doc))
    before = saver_kit.raw()
    with pytest.raises(UnknownSchemaError, match="schema_version 99"):
        saver_kit().get_tuple(_cfg())
    assert saver_kit.raw() == before


def test_format_1_files_are_refused_with_a_clear_reason(saver_kit: SaverKit) -> None:
    """A run stream of the older on-disk format raises OldFormatError (an UnknownSchemaError), untouched."""
    import json
    import zlib

    if saver_kit.kind != "files":
        pytest.skip("format 1 predates the PostgreSQL store: no row was ever written in it")
    tmp_path = saver_kit.base
    path = tmp_path / "tenants/default/sessions/t1/runs/main/checkpoints.jsonl"
    path.parent.mkdir(parents=True)
    body = json.dumps({"schema_version": 1, "checkpoint_id": "x"}, sort_keys=True, separators=(",", ":")).encode()
    crc = format(zlib.crc32(body) & 0xFFFFFFFF, "08x")
    path.write_bytes(body[:-1] + f',"_crc":"{crc}"}}\n'.encode())
    before = path.read_bytes()
    with pytest.raises(OldFormatError, match="older on-disk format") as info:
        JsonlCheckpointSaver(tmp_path).get_tuple(_cfg())
    assert path.read_bytes() == before
    assert "agentrt" not in str(info.value)  # the library's text; agentrt's next step comes from the agent layer
    assert "older agentrt on-disk format" in str(as_agentrt_error(info.value))


def test_get_tuple_reads_the_same_records_after_10_or_1000_checkpoints(saver_kit: SaverKit, monkeypatch: Any) -> None:
    """Latest and by-id lookups go through the index: the records read do not grow with history."""
    counts = []
    for n in (10, 1000):
        saver = saver_kit(fsync="batch")
        parent = None
        for i in range(n):
            cp = _checkpoint({"count": i}, {"count": i + 1})
            stored = saver.put(_cfg(f"t{n}", parent), cp, {"step": i}, {"count": i + 1})
            parent = stored["configurable"]["checkpoint_id"]
        reads: list[int] = []
        orig = _saver_store.SessionStore.read

        def counting(self: Any, *a: Any, _o: Any = orig, _r: list[int] = reads, **k: Any) -> Any:
            _r.append(1)
            return _o(self, *a, **k)

        monkeypatch.setattr(_saver_store.SessionStore, "read", counting)
        fresh = saver_kit()
        assert fresh.get_tuple(_cfg(f"t{n}")) is not None
        assert fresh.get_tuple(_cfg(f"t{n}", parent)) is not None
        counts.append(len(reads))
        monkeypatch.setattr(_saver_store.SessionStore, "read", orig)
    assert counts[0] == counts[1]


def test_keep_last_drops_old_checkpoints_but_keeps_needed_and_pinned(saver_kit: SaverKit) -> None:
    """Retention keeps the newest per run, what they depend on and pinned ones; values stay whole."""
    saver = saver_kit(keep_last=3)
    cfgs = _chain(saver, 2)
    saver.pin(cfgs[1])  # while it is among the newest: every put here ends a run, so retention is eager
    cfgs += _chain_more(saver, cfgs[-1], 2, 200)
    ids = {t.checkpoint["id"] for t in saver.list(_cfg())}
    assert len(ids) < 200
    assert cfgs[1]["configurable"]["checkpoint_id"] in ids
    for c in cfgs[-3:]:
        assert c["configurable"]["checkpoint_id"] in ids
    fresh = saver_kit()
    latest = fresh.get_tuple(_cfg())
    assert latest is not None
    assert [m.content for m in latest.checkpoint["channel_values"]["messages"]] == [f"m{i}" for i in range(200)]
    pinned = fresh.get_tuple(cfgs[1])
    assert pinned is not None and len(pinned.checkpoint["channel_values"]["messages"]) == 2


def _chain_more(saver: JsonlCheckpointSaver, last: Any, start: int, stop: int) -> list[Any]:
    got = saver.get_tuple(last)
    assert got is not None
    msgs = got.checkpoint["channel_values"]["messages"]
    parent = last["configurable"]["checkpoint_id"]
    out = []
    for i in range(start, stop):
        msgs = [*msgs, HumanMessage(f"m{i}", id=f"id{i}")]
        cp = _checkpoint({"messages": msgs, "count": i}, {"messages": i + 1, "count": i + 1})
        stored = saver.put(_cfg("t1", parent), cp, {"step": i}, {"messages": i + 1, "count": i + 1})
        out.append(stored)
        parent = stored["configurable"]["checkpoint_id"]
    return out


def test_big_list_items_are_stored_once_per_session(saver_kit: SaverKit) -> None:
    """A big message in a pending write and in two later list values is written to disk once."""
    saver = saver_kit()
    big = "z" * 5000
    msg = ToolMessage(big, tool_call_id="c", id="m1")
    first = saver.put(_cfg(), _checkpoint({"messages": [msg]}, {"messages": 1}), {}, {"messages": 1})
    saver.put_writes(first, [("messages", [msg])], "task")
    grown = [msg, HumanMessage("next", id="m2")]
    cfg = saver.put(_cfg("t1", first["configurable"]["checkpoint_id"]),
                    _checkpoint({"messages": grown}, {"messages": 2}), {}, {"messages": 2})  # fmt: skip
    assert saver_kit.raw().count(big.encode()) == 1
    fresh = saver_kit()
    got = fresh.get_tuple(cfg)
    assert got is not None and got.checkpoint["channel_values"]["messages"] == grown
    parent = fresh.get_tuple(first)
    assert parent is not None and parent.pending_writes == [("task", "messages", [msg])]


def test_copy_thread_keeps_chains_after_source_is_deleted(saver_kit: SaverKit) -> None:
    """A copied thread reads whole values even after the source thread is deleted."""
    saver = saver_kit()
    _chain(saver, 6, thread="src")
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    got = saver_kit().get_tuple(_cfg("dst"))
    assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == 6
    assert saver.get_tuple(_cfg("src")) is None


def test_delete_for_runs_materializes_what_later_runs_reference(saver_kit: SaverKit) -> None:
    """Deleting an earlier run keeps later runs' checkpoints readable (deltas made whole)."""
    saver = saver_kit()
    first = _chain(saver, 4, run_id="r1")
    got = saver.get_tuple(first[-1])
    assert got is not None
    msgs = [*got.checkpoint["channel_values"]["messages"], HumanMessage("m4", id="id4")]
    cp = _checkpoint({"messages": msgs, "count": 4}, {"messages": 5, "count": 5})
    later = saver.put(_cfg("t1", first[-1]["configurable"]["checkpoint_id"], run_id="r2"), cp, {}, {"messages": 5})
    saver.delete_for_runs(["r1"])
    fresh = saver_kit()
    assert len(list(fresh.list(_cfg()))) == 1
    tup = fresh.get_tuple(later)
    assert tup is not None and [m.content for m in tup.checkpoint["channel_values"]["messages"]][-1] == "m4"
    assert tup.checkpoint["channel_values"]["count"] == 4
    assert not saver_kit.has_run(run="r1")


def test_prune_keep_latest_leaves_a_self_contained_latest(saver_kit: SaverKit) -> None:
    """After prune(keep_latest) the only checkpoint left still has its full history."""
    saver = saver_kit()
    _chain(saver, 30)
    saver.prune(["t1"])
    left = list(saver_kit().list(_cfg()))
    assert len(left) == 1 and len(left[0].checkpoint["channel_values"]["messages"]) == 30
