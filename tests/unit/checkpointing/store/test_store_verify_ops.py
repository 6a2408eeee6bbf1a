"""`SessionStreams.verify()` / `repair(report)` on both stores: the same reports for the same damage
where the stores agree, and on PostgreSQL a damaged last row is a bad tail that the repair cuts,
keeping its bytes in the document `<file>.broken`, while a damaged row followed by intact ones is
left as it is."""

from __future__ import annotations

from typing import Any

import pytest

from checkpointing.records import encode_record
from checkpointing.store.base import EVENTS
from checkpointing.verify import Health


def _fill(kit: Any) -> Any:
    streams = kit.store().session("default", "t1", "always")
    streams.create(EVENTS, [encode_record({"kind": "header", "n": 0})], None)
    streams.append(EVENTS, [encode_record({"n": i}) for i in range(1, 5)], None, None)
    streams.save_doc("session.json", {"session_id": "t1"}, None)
    return streams


def _report(streams: Any, name: str) -> Any:
    return next(r for r in streams.verify() if r.name == name)


def _flip_pg(kit: Any, line_no: int) -> bytes:
    rows = kit.sql(
        "SELECT r.stream, r.pos, r.line FROM {s}.jsonl_records r JOIN {s}.jsonl_streams s ON s.id = r.stream"
        " WHERE s.run = %s ORDER BY r.pos",
        (EVENTS,),
    )
    sid, pos, line = rows[line_no - 1]
    bad = bytearray(bytes(line))
    bad[len(bad) // 2] ^= 0x01
    kit.sql("UPDATE {s}.jsonl_records SET line = %s WHERE stream = %s AND pos = %s", (bytes(bad), sid, pos))
    return bytes(line)


def test_an_intact_session_verifies_on_both_stores(saver_kit: Any) -> None:
    """Every stream and document OK, with its record count."""
    streams = _fill(saver_kit)
    events = _report(streams, "events.jsonl")
    assert events.health is Health.OK and events.records == 5
    assert _report(streams, "session.json").health is Health.OK


def test_postgres_bad_tail_is_cut_and_kept(saver_kit: Any) -> None:
    """The last row damaged: BAD_TAIL (reads refuse it), repaired by a cut that keeps its bytes."""
    if saver_kit.kind != "postgres":
        pytest.skip("rows of the PostgreSQL store")
    streams = _fill(saver_kit)
    _flip_pg(saver_kit, 5)
    report = _report(streams, "events.jsonl")
    assert report.health is Health.BAD_TAIL and report.line == 5 and report.records == 4 and report.repairable
    done = streams.repair(report)
    assert done is not None and "cut the damaged tail of events.jsonl" in done.action
    assert _report(streams, "events.jsonl").health is Health.OK
    assert len(streams.scan(EVENTS).records) == 4
    assert streams.head(EVENTS)[0] == streams.scan(EVENTS).good
    kept = saver_kit.sql("SELECT body FROM {s}.jsonl_documents WHERE name = 'events.jsonl.broken'")
    assert len(kept) == 1 and len(bytes(kept[0][0])) > 0
    streams.append(EVENTS, [encode_record({"n": 5})], None, None)  # the stream goes on
    assert len(streams.scan(EVENTS).records) == 5


def test_postgres_damage_inside_a_stream_is_left(saver_kit: Any) -> None:
    """A damaged row with intact rows after it: CORRUPT, not repairable, nothing changed."""
    if saver_kit.kind != "postgres":
        pytest.skip("rows of the PostgreSQL store")
    streams = _fill(saver_kit)
    _flip_pg(saver_kit, 3)
    report = _report(streams, "events.jsonl")
    assert report.health is Health.CORRUPT and report.line == 3 and not report.repairable
    assert streams.repair(report) is None


def test_postgres_verified_dump_is_verify_and_dump_from_one_read(saver_kit: Any) -> None:
    """What the doctor copies and the verdicts it reports come from one read of the rows, damaged
    ones included: the same as `verify()` and `dump()`."""
    if saver_kit.kind != "postgres":
        pytest.skip("rows of the PostgreSQL store")
    from checkpointing.store.verify_ops import verified_dump

    streams = _fill(saver_kit)
    _flip_pg(saver_kit, 3)
    assert verified_dump(streams) == (streams.verify(), *streams.dump())


def test_postgres_damaged_documents(saver_kit: Any) -> None:
    """A damaged session.json is moved aside; a damaged index is dropped."""
    if saver_kit.kind != "postgres":
        pytest.skip("rows of the PostgreSQL store")
    streams = _fill(saver_kit)
    saver_kit.sql("UPDATE {s}.jsonl_documents SET body = %s WHERE name = 'session.json'", (b'{"_crc":"0"}\n',))
    saver_kit.sql(
        "INSERT INTO {s}.jsonl_documents (tenant, thread, name, body, version)"
        " VALUES ('default', 't1', 'events.jsonl.idx', %s, 1)",
        (b"junk\n",),
    )
    session = _report(streams, "session.json")
    index = _report(streams, "events.jsonl.idx")
    assert session.health is Health.CORRUPT and session.repairable
    assert index.health is Health.STALE
    assert streams.repair(session) is not None and streams.repair(index) is not None
    names = {str(n) for (n,) in saver_kit.sql("SELECT name FROM {s}.jsonl_documents")}
    assert "session.json" not in names and "session.json.broken" in names and "events.jsonl.idx" not in names
