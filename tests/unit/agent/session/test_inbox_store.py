"""The inbox over each store backend (`Inbox.over`): one test body, `files` and `postgres`.

Every read is over a new store object (a fresh process's view); concurrent submitters are real
processes. On `files` the inbox is the session folder's `inbox.jsonl`, the very file `Inbox(base_dir,
...)` writes; on `postgres` the rows of the session's `@inbox` stream.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from agent.core.errors import ConfigError, DataCorrupt, SessionNotFound
from agent.session.inbox import Inbox, TurnStatus
from agent.session.turn_index import TurnIndex
from checkpointing.exceptions import CorruptRecordError
from checkpointing.layout import inbox_file, session_dir, turn_file
from checkpointing.records import encode_record
from checkpointing.store.base import INBOX
from tests.support.savers import SaverKit

TENANT = "acme"


def inbox(kit: SaverKit, tenant: str = TENANT, session: str = "s1") -> Inbox:
    return Inbox.over(kit.store().session(tenant, session, "always"))


def raw_inbox(kit: SaverKit, tenant: str = TENANT, session: str = "s1") -> bytes:
    if kit.kind == "files":
        return inbox_file(session_dir(kit.base, tenant, session)).read_bytes()
    return kit.raw(thread=session, run=INBOX, tenant=tenant)


def test_turns_submitted_started_and_done_read_back(saver_kit: SaverKit) -> None:
    inbox(saver_kit).submit("first", "t-1", "u1")
    inbox(saver_kit).submit("second", "t-2", None, live=True)
    inbox(saver_kit).mark_started("t-1", "", "w1")
    inbox(saver_kit).mark_done("t-1", {"status": "COMPLETED", "run_id": "r1"}, "w1")
    turns = inbox(saver_kit).turns()
    assert [(t.turn_id, t.text, t.status) for t in turns] == [
        ("t-1", "first", TurnStatus.COMPLETED),
        ("t-2", "second", TurnStatus.PENDING),
    ]
    assert turns[0].attempts == 1 and turns[0].result["run_id"] == "r1" and turns[1].live
    assert inbox(saver_kit).next_open() is not None and inbox(saver_kit).next_open().turn_id == "t-2"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="used before"):
        inbox(saver_kit).submit("again", "t-1", "u1")
    assert len(inbox(saver_kit).records()) == 4


def test_on_files_the_inbox_file_is_the_one_the_file_inbox_reads_and_writes(tmp_path: Path) -> None:
    kit = SaverKit("files", tmp_path / "state")
    inbox(kit).submit("over the store", "t-1", "u1")
    Inbox(kit.base, TENANT, "s1").submit("over the file", "t-2", "u1")
    records = Inbox(kit.base, TENANT, "s1").records()
    assert raw_inbox(kit) == b"".join(encode_record(r) for r in records)
    assert [t.text for t in inbox(kit).turns()] == ["over the store", "over the file"]


def test_a_turn_id_is_reserved_once_per_tenant(saver_kit: SaverKit) -> None:
    TurnIndex.over(saver_kit.store(), TENANT).reserve("t-1", "s1")
    with pytest.raises(ConfigError, match="used before"):
        TurnIndex.over(saver_kit.store(), TENANT).reserve("t-1", "s2")
    TurnIndex.over(saver_kit.store(), "other").reserve("t-1", "s9")  # another tenant's ids are its own
    assert TurnIndex.over(saver_kit.store(), TENANT).session_of("t-1") == "s1"
    assert TurnIndex.over(saver_kit.store(), "other").session_of("t-1") == "s9"
    with pytest.raises(SessionNotFound):
        TurnIndex.over(saver_kit.store(), TENANT).session_of("t-2")
    if saver_kit.kind == "files":  # the file the file index always wrote, and reads
        assert turn_file(saver_kit.base, TENANT, "t-1").read_bytes() == encode_record(
            {"session_id": "s1", "turn_id": "t-1"}
        )
        assert TurnIndex(saver_kit.base, TENANT).session_of("t-1") == "s1"


def test_a_damaged_reservation_is_refused(saver_kit: SaverKit) -> None:
    TurnIndex.over(saver_kit.store(), TENANT).reserve("t-1", "s1")
    if saver_kit.kind == "files":
        path = turn_file(saver_kit.base, TENANT, "t-1")
        path.write_bytes(path.read_bytes().replace(b'"s1"', b'"s7"'))
    else:
        saver_kit.sql(
            "UPDATE {s}.jsonl_reservations SET body = convert_to(replace(convert_from(body, 'UTF8'),"
            " '\"s1\"', '\"s7\"'), 'UTF8') WHERE tenant = %s AND key = %s",
            (TENANT, "t-1"),
        )
    with pytest.raises(CorruptRecordError):
        saver_kit.store().reserved(TENANT, "t-1")
    # On PostgreSQL the damage is refused; on files the reservation is rebuilt from the inbox
    # holding the turn, and none does here: the turn was never submitted.
    refused = DataCorrupt if saver_kit.kind == "postgres" else SessionNotFound
    with pytest.raises(refused, match="t-1"):
        TurnIndex.over(saver_kit.store(), TENANT).session_of("t-1")
    with pytest.raises(ConfigError, match="used before"):  # a damaged reservation still holds its id
        TurnIndex.over(saver_kit.store(), TENANT).reserve("t-1", "s2")


def _submit_many(kind: str, base: str, schema: str, who: str, n: int) -> None:
    store = SaverKit(kind, Path(base), schema).store()  # the process's own store
    try:
        for i in range(n):
            Inbox.over(store.session(TENANT, "s1", "always")).submit(f"{who} {i}", f"{who}-{i}", who)
    finally:
        store.close()


def test_two_processes_submitting_at_once_leave_every_turn_once_in_one_order(saver_kit: SaverKit) -> None:
    ctx = multiprocessing.get_context("spawn")
    n = 100  # enough that the two processes overlap on both backends
    procs = [
        ctx.Process(target=_submit_many, args=(saver_kit.kind, str(saver_kit.base), saver_kit.schema, who, n))
        for who in ("pa", "pb")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    ids = [t.turn_id for t in inbox(saver_kit).turns()]
    assert sorted(ids) == sorted(f"{who}-{i}" for who in ("pa", "pb") for i in range(n))
    assert len(ids) == len(set(ids)) == 2 * n
    for who in ("pa", "pb"):  # each submitter's turns in the order it submitted them
        assert [i for i in ids if i.startswith(who)] == [f"{who}-{i}" for i in range(n)]
    assert [t.turn_id for t in inbox(saver_kit).turns()] == ids  # every reader sees the same order


def test_a_conditional_append_is_refused_when_the_end_moved(saver_kit: SaverKit) -> None:
    streams = saver_kit.store().session(TENANT, "s1", "always")
    first = encode_record({"kind": "submitted", "turn_id": "t-1", "text": "x", "ts": 1.0})
    assert streams.append_if(INBOX, [first], 0) == [0]
    before = raw_inbox(saver_kit)
    late = encode_record({"kind": "submitted", "turn_id": "t-2", "text": "y", "ts": 2.0})
    assert saver_kit.store().session(TENANT, "s1", "always").append_if(INBOX, [late], 0) is None
    assert raw_inbox(saver_kit) == before
    end = saver_kit.store().session(TENANT, "s1", "always").head(INBOX)[0]
    assert end == len(first)
    assert saver_kit.store().session(TENANT, "s1", "always").append_if(INBOX, [late], end) == [end]
    assert [t.turn_id for t in inbox(saver_kit).turns()] == ["t-1", "t-2"]


def test_tenants_sharing_a_session_id_are_isolated(saver_kit: SaverKit) -> None:
    inbox(saver_kit, "acme").submit("for acme", "t-1", "u1")
    inbox(saver_kit, "other").submit("for other", "t-1", "u2")
    assert [t.text for t in inbox(saver_kit, "acme").turns()] == ["for acme"]
    assert [(t.text, t.tenant_id) for t in inbox(saver_kit, "other").turns()] == [("for other", "other")]


def test_a_damaged_record_is_refused_naming_the_inbox(saver_kit: SaverKit) -> None:
    inbox(saver_kit).submit("hello world", "t-1", "u1")
    inbox(saver_kit).submit("second turn", "t-2", "u1")
    change = lambda line: line.replace(b"hello world", b"hello wOrld")  # noqa: E731
    if saver_kit.kind == "files":
        path = inbox_file(session_dir(saver_kit.base, TENANT, "s1"))
        path.write_bytes(change(path.read_bytes()))
    else:
        saver_kit.change_line(1, change, thread="s1", run=INBOX, tenant=TENANT)
    with pytest.raises(CorruptRecordError) as info:
        inbox(saver_kit).turns()
    assert type(info.value) is CorruptRecordError
    assert "inbox.jsonl" in str(info.value) and info.value.line == 1
    with pytest.raises(CorruptRecordError):
        inbox(saver_kit).submit("third", "t-3", "u1")  # nothing is appended after damage
