"""The session event log: header, entry tree, blobs, torn tail and corruption, fencing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.core.events import EVENT_TYPES, SESSION_EVENTS
from checkpointing.entry_log import EventLog, EventSchema, read_header
from checkpointing.exceptions import CorruptRecordError, InvalidIdError, StaleFencingTokenError
from checkpointing.records import frame

HEADER = {
    "tenant_id": "t1",
    "agent_id": "agent",
    "user_id": "u1",
    "session_id": "s1",
    "created_at": "2026-01-01T00:00:00+00:00",
    "config_digest": "sha256:abc",
}


def new_log(base: Path, **kw: object) -> EventLog:
    """A fresh log with its header written, under agentrt's session schema."""
    log = EventLog(base, "t1", "s1", schema=SESSION_EVENTS, **kw)  # type: ignore[arg-type]
    log.create(HEADER)
    return log


def test_header_is_the_first_line_with_every_field(tmp_path: Path) -> None:
    """The header line carries schema version, ids, created time and config digest."""
    log = new_log(tmp_path)
    first = json.loads(log.path.read_bytes().splitlines()[0])
    assert first["kind"] == "header" and first["schema_version"] == 2
    for k, v in HEADER.items():
        assert first[k] == v
    assert log.path == tmp_path / "tenants/t1/sessions/s1/events.jsonl"
    assert read_header(log.path) == log.header()


def test_create_refuses_an_existing_log(tmp_path: Path) -> None:
    """Creating a log twice fails instead of overwriting history."""
    new_log(tmp_path)
    with pytest.raises(FileExistsError):
        EventLog(tmp_path, "t1", "s1").create(HEADER)


def test_entries_form_a_tree_with_projections(tmp_path: Path) -> None:
    """Entries link to parents; path_to_root and children follow those links."""
    log = new_log(tmp_path)
    a = log.append("user_turn", {"content": "hi"})
    b = log.append("tool_call", {"name": "x"}, parent_id=a.id)
    c = log.append("tool_result", {"ok": True}, parent_id=b.id)
    d = log.append("branch_created", {"from_entry_id": a.id}, parent_id=a.id, branch_id="b2")
    assert [e.id for e in log.path_to_root(c.id)] == [c.id, b.id, a.id]
    assert [e.id for e in log.projection(d.id)] == [a.id, d.id]
    assert [e.id for e in log.children(a.id)] == [b.id, d.id]
    assert log.branches() == {"main": c.id, "b2": d.id}
    assert [e.id for e in log.entries()] == sorted(e.id for e in log.entries())  # sortable ids
    reopened = EventLog(tmp_path, "t1", "s1")
    assert reopened.entries() == log.entries()


def test_every_seed_event_type_is_accepted_and_others_refused(tmp_path: Path) -> None:
    """All listed event types append; an unknown type is refused."""
    log = new_log(tmp_path)
    for t in sorted(EVENT_TYPES):
        log.append(t, {"t": t})
    assert {e.type for e in log.entries()} == EVENT_TYPES
    with pytest.raises(ValueError, match="unknown event type"):
        log.append("rm_rf", {})


def test_agentrt_header_line_is_byte_identical_to_the_session_format(tmp_path: Path) -> None:
    """Under agentrt's schema the header line is exactly the one sessions always had (same fields, same order)."""
    log = new_log(tmp_path)
    body = (
        b'{"kind":"header","schema_version":2,"tenant_id":"t1","agent_id":"agent","user_id":"u1",'
        b'"session_id":"s1","created_at":"2026-01-01T00:00:00+00:00","config_digest":"sha256:abc"}'
    )
    assert log.path.read_bytes() == frame(body)


def test_without_a_schema_any_type_is_taken_and_the_header_is_the_logs_own(tmp_path: Path) -> None:
    """A log opened with no schema (a LangGraph user's) takes any non-empty type; its header holds
    only the log's identity and creation time, whatever else the caller passes."""
    log = EventLog(tmp_path, "t1", "s1")
    header = log.create({"tenant_id": "t1", "session_id": "s1", "agent_id": "ignored"})
    assert list(header) == ["kind", "schema_version", "tenant_id", "session_id", "created_at"]
    assert header["created_at"] and read_header(log.path) == header
    a = log.append("anything", {"n": 1})
    b = log.append("rm_rf", {"n": 2}, parent_id=a.id)
    assert [e.type for e in EventLog(tmp_path, "t1", "s1").projection(b.id)] == ["anything", "rm_rf"]
    with pytest.raises(ValueError, match="non-empty"):
        log.append("", {})


def test_an_owner_schema_sets_the_types_and_the_header(tmp_path: Path) -> None:
    """An owner's schema: its header fields in its order, unknown types refused with the allowed list;
    reads do not depend on the schema a log is opened with."""
    schema = EventSchema(types=frozenset({"opened", "closed"}), header_fields=("session_id", "owner", "tenant_id"))
    log = EventLog(tmp_path, "t1", "s1", schema=schema)
    log.create({"tenant_id": "t1", "session_id": "s1", "owner": "me", "created_at": "not written"})
    assert log.path.read_bytes() == frame(
        b'{"kind":"header","schema_version":2,"session_id":"s1","owner":"me","tenant_id":"t1"}'
    )
    e = log.append("opened", {})
    with pytest.raises(ValueError, match=r"unknown event type 'user_turn'; use one of \['closed', 'opened'\]"):
        log.append("user_turn", {})
    other = EventLog(tmp_path, "t1", "s1", schema=SESSION_EVENTS)
    assert [x.id for x in other.entries()] == [e.id] and other.header() == log.header()
    with pytest.raises(ValueError, match="header"):
        log.create({"tenant_id": "t2", "session_id": "s1"})


def test_a_schema_must_keep_the_logs_identity_in_its_header() -> None:
    """tenant_id and session_id are always header fields (the log checks them against its path)."""
    with pytest.raises(ValueError, match="tenant_id"):
        EventSchema(header_fields=("session_id", "created_at"))
    with pytest.raises(ValueError, match="reserved"):
        EventSchema(header_fields=("tenant_id", "session_id", "kind"))


def test_unknown_parent_and_bad_ids_are_refused(tmp_path: Path) -> None:
    """A missing parent, an unsafe branch id or an unsafe session id is refused."""
    log = new_log(tmp_path)
    with pytest.raises(KeyError):
        log.append("user_turn", {}, parent_id="nope")
    with pytest.raises(InvalidIdError):
        log.append("user_turn", {}, branch_id="../x")
    with pytest.raises(InvalidIdError):
        EventLog(tmp_path, "t1", "../../etc")


def test_large_payload_goes_to_a_blob_and_reads_back(tmp_path: Path) -> None:
    """A payload over inline_payload_max_bytes is a blob ref on disk and whole on read."""
    log = new_log(tmp_path, inline_payload_max_bytes=100)
    big = {"content": "x" * 5000}
    e = log.append("tool_result", big)
    raw = log.raw(e.id)
    assert set(raw["payload"]) == {"$blob", "size"}
    assert b"x" * 5000 not in log.path.read_bytes()
    assert EventLog(tmp_path, "t1", "s1").entry(e.id).payload == big
    small = log.append("tool_result", {"content": "y"}, parent_id=e.id)
    assert log.raw(small.id)["payload"] == {"content": "y"}


def test_payload_at_the_limit_stays_inline_in_a_longer_record(tmp_path: Path) -> None:
    """The limit is the payload's size, not the record's: a payload of exactly the limit stays in the
    line though the line (ids, time) is longer, one byte more goes to a blob."""
    log = new_log(tmp_path, inline_payload_max_bytes=100)
    at = {"content": "z" * (100 - len('{"content":""}'))}
    e = log.append("tool_result", at)
    assert log.raw(e.id)["payload"] == at
    over = log.append("tool_result", {"content": at["content"] + "z"}, parent_id=e.id)
    assert set(log.raw(over.id)["payload"]) == {"$blob", "size"}
    assert EventLog(tmp_path, "t1", "s1").entry(over.id).payload == {"content": "z" * 87}


def test_torn_tail_is_skipped_by_reads_and_cut_by_the_next_append(tmp_path: Path) -> None:
    """A half-written last line is ignored by reads (file untouched), moved to .broken by the next append."""
    log = new_log(tmp_path)
    a = log.append("user_turn", {"content": "hi"})
    with open(log.path, "ab") as fh:
        fh.write(b'{"id":"torn","type":"user_t')
    reopened = EventLog(tmp_path, "t1", "s1")
    assert [e.id for e in reopened.entries()] == [a.id]
    assert log.path.read_bytes().endswith(b'{"id":"torn","type":"user_t')
    assert not (log.path.parent / "events.jsonl.broken").exists()
    b = reopened.append("assistant_message", {"content": "yo"}, parent_id=a.id)
    assert [e.id for e in EventLog(tmp_path, "t1", "s1").entries()] == [a.id, b.id]
    assert (log.path.parent / "events.jsonl.broken").read_bytes() == b'{"id":"torn","type":"user_t'


def test_corruption_before_the_end_blocks_with_file_and_line(tmp_path: Path) -> None:
    """A damaged record that is not the last line raises CorruptRecordError naming the line."""
    log = new_log(tmp_path)
    log.append("user_turn", {"content": "hello"})
    log.append("user_turn", {"content": "again"})
    data = log.path.read_bytes().replace(b"hello", b"jello")
    log.path.write_bytes(data)
    before = log.path.read_bytes()
    with pytest.raises(CorruptRecordError) as info:
        EventLog(tmp_path, "t1", "s1").entries()
    assert info.value.line == 2 and "events.jsonl" in str(info.value)
    assert log.path.read_bytes() == before


def test_a_log_without_header_is_corrupt(tmp_path: Path) -> None:
    """A file whose first record is not the header is refused."""
    log = new_log(tmp_path)
    log.append("user_turn", {})
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(lines[1] + lines[1])
    with pytest.raises(CorruptRecordError, match="header"):
        EventLog(tmp_path, "t1", "s1").entries()


def test_index_catches_up_with_another_writer(tmp_path: Path) -> None:
    """Entries appended through a second handle (another process) are seen by the first."""
    one = new_log(tmp_path)
    a = one.append("user_turn", {"content": "1"})
    two = EventLog(tmp_path, "t1", "s1")
    b = two.append("assistant_message", {"content": "2"}, parent_id=a.id)
    c = one.append("user_turn", {"content": "3"}, parent_id=b.id)
    assert [e.id for e in one.path_to_root(c.id)] == [c.id, b.id, a.id]
    assert [e.id for e in two.entries()] == [a.id, b.id, c.id]


def test_stale_fencing_token_is_refused(tmp_path: Path) -> None:
    """After a write with token 5, a writer holding token 4 cannot append."""
    log = new_log(tmp_path)
    log.append("run_start", {}, fencing_token=5)
    with pytest.raises(StaleFencingTokenError):
        EventLog(tmp_path, "t1", "s1").append("run_end", {}, fencing_token=4)
    assert log.append("run_end", {}, fencing_token=6).fence == 6
    assert [e.type for e in log.entries()] == ["run_start", "run_end"]


def test_reserved_blob_key_in_payload_is_refused(tmp_path: Path) -> None:
    """A payload shaped like a blob reference cannot be smuggled in as one."""
    log = new_log(tmp_path)
    with pytest.raises(ValueError, match="reserved"):
        log.append("tool_result", {"$blob": "sha256:" + "0" * 64, "size": 1})


def test_missing_blob_fails_only_the_entry_that_needs_it(tmp_path: Path) -> None:
    """A deleted blob raises BlobMissingError when its entry is read; typed projections skip it."""
    from checkpointing.exceptions import BlobMissingError

    log = new_log(tmp_path, inline_payload_max_bytes=50)
    a = log.append("user_turn", {"content": "hi"})
    b = log.append("tool_result", {"content": "z" * 500}, parent_id=a.id)
    for blob in (tmp_path / "blobs").rglob("*"):
        if blob.is_file():
            blob.unlink()
    with pytest.raises(BlobMissingError, match="blob volume"):
        EventLog(tmp_path, "t1", "s1").entry(b.id)
    assert [e.id for e in log.projection(b.id, frozenset({"user_turn"}))] == [a.id]


def test_reopened_log_answers_tail_questions_like_the_writer(tmp_path: Path) -> None:
    """A reopened log (payloads read on demand) gives the same entries, newest matches and envelopes."""
    log = new_log(tmp_path)
    a = log.append("user_turn", {"content": "first", "run_id": "r1"})
    b = log.append("run_end", {"run_id": "r1"}, parent_id=a.id, fencing_token=3)
    c = log.append("user_turn", {"content": 'second "quoted" é', "run_id": "r2"}, parent_id=b.id)
    reopened = EventLog(tmp_path, "t1", "s1")
    assert reopened.entries() == log.entries()
    assert reopened.entry(b.id).fence == 3 and reopened.raw(b.id) == log.raw(b.id)
    assert [e.id for e in reopened.entries(frozenset({"user_turn"}))] == [a.id, c.id]
    newest = reopened.newest(frozenset({"user_turn"}))
    assert newest is not None and newest.payload["content"] == 'second "quoted" é'
    assert reopened.newest(frozenset({"user_turn"}), {"run_id": "r1"}) == log.entry(a.id)
    assert reopened.newest(frozenset({"user_turn"}), {"run_id": "r3"}) is None
    assert reopened.newest(frozenset({"run_fail"})) is None
    assert reopened.envelopes() == [
        {"id": e.id, "parent_id": e.parent_id, "branch_id": e.branch_id, "type": e.type} for e in log.entries()
    ]


def test_entries_written_with_another_key_order_still_read(tmp_path: Path) -> None:
    """An entry whose fields are in another order (another writer) is indexed from its full record."""
    from checkpointing.record_log import RecordLog

    log = new_log(tmp_path)
    a = log.append("user_turn", {"content": "hi"})
    RecordLog(log.path).append(
        {"type": "tool_call", "branch_id": "main", "id": "0" * 8, "parent_id": a.id, "ts": "t", "payload": {"x": 1}}
    )
    reopened = EventLog(tmp_path, "t1", "s1")
    assert reopened.branches() == {"main": "0" * 8}
    assert [e.type for e in reopened.path_to_root("0" * 8)] == ["tool_call", "user_turn"]
    assert reopened.entry("0" * 8).payload == {"x": 1}
