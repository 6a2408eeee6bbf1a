"""The session event log over each store backend: one test body, `files` and `postgres`.

Each log is opened over a new store object (`EventLog.over(store.session(...))`), so a read
after a write is a fresh process's view: nothing of the writer in memory. On `files` the log
is the session folder's `events.jsonl`; on `postgres` the rows of the session's `@events`
stream, in a schema of the test's own (`tests.support.savers.SaverKit`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkpointing.blobs import BlobStore
from checkpointing.entry_log import EventLog
from checkpointing.exceptions import CorruptRecordError, StaleFencingTokenError
from checkpointing.layout import events_file, index_file, session_dir
from checkpointing.records import encode_record
from checkpointing.store.base import EVENTS
from tests.support.savers import SaverKit

TENANT = "acme"


def header(tenant: str = TENANT, session: str = "s1") -> dict[str, Any]:
    return {"tenant_id": tenant, "session_id": session, "created_at": "2026-01-01T00:00:00+00:00"}


def open_log(kit: SaverKit, tenant: str = TENANT, session: str = "s1", **kw: Any) -> EventLog:
    """The log of (tenant, session) over a new store object of the kit's backend."""
    streams = kit.store().session(tenant, session, "always")
    return EventLog.over(streams, BlobStore(kit.base), **kw)


def new_log(kit: SaverKit, tenant: str = TENANT, session: str = "s1", **kw: Any) -> EventLog:
    log = open_log(kit, tenant, session, **kw)
    log.create(header(tenant, session))
    return log


def raw_stream(kit: SaverKit, tenant: str = TENANT, session: str = "s1") -> bytes:
    """The event stream's bytes: the file, or the rows concatenated in order."""
    if kit.kind == "files":
        return events_file(session_dir(kit.base, tenant, session)).read_bytes()
    return kit.raw(thread=session, run=EVENTS, tenant=tenant)


def damage_line(kit: SaverKit, n: int, old: bytes, new: bytes) -> None:
    """Replace `old` by `new` (same length) in line `n` of the event stream, behind the log's back."""
    change = lambda line: line.replace(old, new)  # noqa: E731
    if kit.kind == "postgres":
        kit.change_line(n, change, thread="s1", run=EVENTS, tenant=TENANT)
        return
    path = events_file(session_dir(kit.base, TENANT, "s1"))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[n - 1] = change(lines[n - 1])
    path.write_bytes(b"".join(lines))


def test_a_forked_log_reads_back_whole_in_a_new_process(saver_kit: SaverKit, tmp_path: Path) -> None:
    """Entries, fork, branches and paths written through one log are read back by another; the
    stream's bytes are an events.jsonl the files log reads the same."""
    log = new_log(saver_kit)
    a = log.append("user_turn", {"content": "hi"})
    b = log.append("assistant_message", {"content": "hello é"}, parent_id=a.id)
    c = log.append("user_turn", {"content": "more"}, parent_id=b.id)
    d = log.append("branch_created", {"from": b.id}, parent_id=b.id, branch_id="b2")
    e = log.append("user_turn", {"content": "other way"}, parent_id=d.id, branch_id="b2")
    other = open_log(saver_kit)
    f = other.append("assistant_message", {"content": "late"}, parent_id=c.id)  # a second writer
    g = log.append("user_turn", {"content": "after"}, parent_id=f.id)  # the first catches up

    again = open_log(saver_kit)
    assert again.header() == {"kind": "header", "schema_version": 2, **header()}
    assert [x.id for x in again.entries()] == [a.id, b.id, c.id, d.id, e.id, f.id, g.id]
    assert again.entries() == log.entries() == other.entries()
    assert again.branches() == {"main": g.id, "b2": e.id}
    assert again.branch_stats() == {"main": (a.id, 5), "b2": (d.id, 2)}
    assert [x.id for x in again.path_to_root(e.id)] == [e.id, d.id, b.id, a.id]
    assert [x.payload["content"] for x in again.projection(g.id, frozenset({"user_turn"}))] == ["hi", "more", "after"]
    assert [x.id for x in again.children(b.id)] == [c.id, d.id]

    copy = tmp_path / "copy"
    path = events_file(session_dir(copy, TENANT, "s1"))
    path.parent.mkdir(parents=True)
    path.write_bytes(raw_stream(saver_kit))
    assert EventLog(copy, TENANT, "s1").entries() == again.entries()


def test_a_persisted_index_is_read_back_by_a_new_log(saver_kit: SaverKit) -> None:
    """The index saved beside the log (events.jsonl.idx, or its row) gives a new log the same
    answers, entries appended after it included."""
    log = new_log(saver_kit)
    parent = None
    for i in range(80):
        parent = log.append("node_end", {"i": i}, parent_id=parent, branch_id="main" if i < 60 else "b2").id
    log.save_index()
    late = open_log(saver_kit).append("user_turn", {"i": "late"}, parent_id=parent)
    if saver_kit.kind == "files":
        assert index_file(events_file(session_dir(saver_kit.base, TENANT, "s1"))).exists()
    else:
        names = saver_kit.sql("SELECT name FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s", (TENANT, "s1"))
        assert names == [("events.jsonl.idx",)]
    again = open_log(saver_kit)
    assert again.entries() == open_log(saver_kit).entries()
    assert [x.id for x in again.path_to_root(late.id)][:2] == [late.id, parent]
    assert again.branch_stats()["b2"][1] == 20 and again.header() == {"kind": "header", "schema_version": 2, **header()}


def test_a_large_payload_is_kept_as_a_blob_and_read_back_whole(saver_kit: SaverKit) -> None:
    """A payload over the inline limit is a blob reference in the stream; a new log resolves it."""
    log = new_log(saver_kit, inline_payload_max_bytes=100)
    big = {"content": "z" * 5000}
    entry = log.append("tool_result", big)
    stored = open_log(saver_kit).raw(entry.id)["payload"]
    assert set(stored) == {"$blob", "size"} and stored["$blob"].startswith("sha256:")
    assert b"z" * 200 not in raw_stream(saver_kit)
    assert open_log(saver_kit).entry(entry.id).payload == big


def test_a_stale_fencing_token_is_refused(saver_kit: SaverKit) -> None:
    """After a write with token 5 (or a lease granted 7), a writer holding a lower one cannot append."""
    log = new_log(saver_kit)
    first = log.append("run_start", {}, fencing_token=5)
    with pytest.raises(StaleFencingTokenError):
        open_log(saver_kit).append("run_end", {}, fencing_token=4)
    saver_kit.store().session(TENANT, "s1", "always").advance_fence(7)
    with pytest.raises(StaleFencingTokenError):
        log.append("run_end", {}, parent_id=first.id, fencing_token=6)
    last = open_log(saver_kit).append("run_end", {}, parent_id=first.id, fencing_token=7)
    assert [(x.type, x.fence) for x in open_log(saver_kit).entries()] == [("run_start", 5), ("run_end", 7)]
    assert last.fence == 7


def test_creating_an_existing_log_is_refused(saver_kit: SaverKit) -> None:
    """Of two creators of one session's log the second fails; the first header stays."""
    first = new_log(saver_kit)
    with pytest.raises(FileExistsError, match="already exists"):
        open_log(saver_kit).create(header())
    assert open_log(saver_kit).header() == first.header()
    assert raw_stream(saver_kit).count(b'"kind":"header"') == 1


def test_a_damaged_line_is_refused_naming_the_stream_and_line(saver_kit: SaverKit) -> None:
    """A complete line whose checksum fails (a file's line, a row's bytes) raises
    CorruptRecordError itself, naming the event stream and the line, by a scan and by a read at
    an indexed offset; nothing is changed."""
    log = new_log(saver_kit)
    a = log.append("user_turn", {"content": "hello"})
    b = log.append("user_turn", {"content": "again"}, parent_id=a.id)
    log.save_index()
    indexed = open_log(saver_kit)  # restored from the index: bodies read at their offsets
    assert indexed.has(b.id)
    damage_line(saver_kit, 2, b"hello", b"jello")
    before = raw_stream(saver_kit)
    with pytest.raises(CorruptRecordError) as read:
        indexed.entry(a.id)
    if saver_kit.kind == "postgres":
        saver_kit.sql("DELETE FROM {s}.jsonl_documents")  # the next log scans the rows
    else:
        index_file(log.path).unlink()
    with pytest.raises(CorruptRecordError) as scanned:
        open_log(saver_kit).entries()
    for info in (read, scanned):
        assert type(info.value) is CorruptRecordError
        assert info.value.line == 2 and info.value.path.endswith("tenants/acme/sessions/s1/events.jsonl")
    assert raw_stream(saver_kit) == before


def test_a_torn_tail_is_skipped_on_files_and_refused_as_a_row(saver_kit: SaverKit) -> None:
    """files: an incomplete last line (a crash mid-append) is not an entry, and the next append
    moves it aside and goes on. postgres: an append is a row whole or nothing, so a row without
    its newline is damage, refused naming the stream and line."""
    log = new_log(saver_kit)
    a = log.append("user_turn", {"content": "hi"})
    torn = encode_record({"id": "torn", "type": "user_turn"})[:25]
    if saver_kit.kind == "postgres":
        saver_kit.append_line(torn, thread="s1", run=EVENTS, tenant=TENANT)
        with pytest.raises(CorruptRecordError, match="no terminating newline") as info:
            open_log(saver_kit).entries()
        assert info.value.line == 3 and info.value.path.endswith("sessions/s1/events.jsonl")
        return
    with open(log.path, "ab") as fh:
        fh.write(torn)
    before = log.path.read_bytes()
    assert [x.id for x in open_log(saver_kit).entries()] == [a.id]
    assert log.path.read_bytes() == before  # a read changes nothing
    b = open_log(saver_kit).append("assistant_message", {"content": "yo"}, parent_id=a.id)
    assert [x.id for x in open_log(saver_kit).entries()] == [a.id, b.id]
    assert (log.path.parent / "events.jsonl.broken").read_bytes() == torn


def test_sessions_and_tenants_are_isolated(saver_kit: SaverKit) -> None:
    """Logs of two sessions of one tenant and of the same session id under two tenants never see
    each other's entries; an event log is no run stream (no run listed, no thread listed)."""
    keys = [(TENANT, "s1"), (TENANT, "s2"), ("other", "s1")]
    written = {}
    for tenant, session in keys:
        log = new_log(saver_kit, tenant, session)
        written[(tenant, session)] = [log.append("user_turn", {"who": f"{tenant}/{session}/{i}"}).id for i in range(3)]
    for tenant, session in keys:
        log = open_log(saver_kit, tenant, session)
        assert [x.id for x in log.entries()] == written[(tenant, session)]
        assert {x.payload["who"].rsplit("/", 1)[0] for x in log.entries()} == {f"{tenant}/{session}"}
        assert log.header() == {"kind": "header", "schema_version": 2, **header(tenant, session)}
    store = saver_kit.store()
    assert store.threads() == []
    streams = store.session(TENANT, "s1", "always")
    assert streams.heads() == {}
    streams.append("main", [encode_record({"k": "x"})], None, None)  # a run stream beside the log
    assert list(streams.heads()) == ["main"] and store.threads() == [(TENANT, "s1")]
    assert [x.id for x in open_log(saver_kit).entries()] == written[(TENANT, "s1")]
