"""The PostgreSQL store's append at the end a writer remembers (`jsonl_append_at`), when that end
is no longer the stream's: another writer of the session appended, the stream was cut shorter or
rewritten, the fence moved on. Each record lands at the stream's real end (no gap, no overlap, no
row outside a stream) or, for a stale lease token, nowhere."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from checkpointing.exceptions import StaleFencingTokenError
from checkpointing.records import frame
from checkpointing.store.postgres import PostgresSessionStreams
from tests.support.savers import SaverKit

TENANT, THREAD, RUN = "acme", "s1", "main"


def _body(n: int) -> bytes:
    return orjson.dumps({"n": n, "pad": "x" * n})


def _line(n: int) -> bytes:
    return frame(_body(n))


def _streams(pg: SaverKit) -> PostgresSessionStreams:
    store: Any = pg.store()
    return store.session(TENANT, THREAD, "always")  # type: ignore[no-any-return]


def _read(streams: PostgresSessionStreams) -> list[bytes]:
    """The stream's records, each verified (a gap or a torn row raises), as the lines written."""
    return [frame(body) for _, body in streams.scan(RUN).records]


def _orphans(pg: SaverKit) -> int:
    rows = pg.sql("SELECT count(*) FROM {s}.jsonl_records WHERE stream NOT IN (SELECT id FROM {s}.jsonl_streams)")
    return int(rows[0][0])


def test_two_writers_of_one_session_taking_turns_keep_every_record_in_order(pg: SaverKit) -> None:
    first, second = _streams(pg), _streams(pg)
    written: list[bytes] = []
    for n in range(6):
        writer = first if n % 2 == 0 else second  # each remembers an end the other moved
        positions, _, _ = writer.append(RUN, [_line(n)], None, 1)
        assert positions == [sum(len(x) for x in written)]
        written.append(_line(n))
    assert _read(first) == written
    assert pg.raw(THREAD, RUN, TENANT) == b"".join(written)


def test_an_append_after_the_stream_was_cut_shorter_goes_to_its_new_end(pg: SaverKit) -> None:
    streams = _streams(pg)
    for n in range(3):
        streams.append(RUN, [_line(n)], None, 1)
    cut = len(_line(0))
    pg.sql("DELETE FROM {s}.jsonl_records WHERE pos >= %s", (cut,))  # what a repair of a bad tail does
    assert streams.append(RUN, [_line(9)], None, 1)[0] == [cut]
    assert _read(streams) == [_line(0), _line(9)]


def test_an_append_after_another_writer_rewrote_the_stream_goes_to_the_new_stream(pg: SaverKit) -> None:
    streams, other = _streams(pg), _streams(pg)
    streams.append(RUN, [_line(0)], None, 1)
    streams.append(RUN, [_line(1)], None, 1)
    other.replace(RUN, [_line(5)])
    assert streams.append(RUN, [_line(6)], None, 1)[0] == [len(_line(5))]
    assert _read(streams) == [_line(5), _line(6)]
    assert _orphans(pg) == 0


def test_an_append_after_the_session_was_deleted_starts_a_new_stream(pg: SaverKit) -> None:
    streams, other = _streams(pg), _streams(pg)
    streams.append(RUN, [_line(0)], None, 1)
    other.remove()
    assert streams.append(RUN, [_line(1)], None, 1)[0] == [0]
    assert _read(streams) == [_line(1)]
    assert _orphans(pg) == 0


def test_a_writer_whose_lease_was_taken_over_is_refused_at_the_end_it_remembers(pg: SaverKit) -> None:
    old, new = _streams(pg), _streams(pg)
    old.append(RUN, [_line(0)], None, 1)
    new.advance_fence(2)  # the new owner's lease
    with pytest.raises(StaleFencingTokenError):
        old.append(RUN, [_line(1)], None, 1)
    assert _read(new) == [_line(0)]
    new.append(RUN, [_line(2)], None, 2)
    with pytest.raises(StaleFencingTokenError):
        old.append(RUN, [_line(3)], None, 1)
    assert _read(new) == [_line(0), _line(2)]


def test_appends_that_do_not_wait_for_the_flush_are_checked_by_commit(pg: SaverKit) -> None:
    streams = _streams(pg)
    for n in range(3):
        streams.append(RUN, [_line(n)], "batch", 1)
    streams.commit(RUN)
    assert _read(_streams(pg)) == [_line(0), _line(1), _line(2)]


def test_appends_after_a_created_stream_and_a_conditional_append_follow_them(pg: SaverKit) -> None:
    streams, other = _streams(pg), _streams(pg)
    assert streams.create(RUN, [_line(0), _line(1)], None)
    end = len(_line(0)) + len(_line(1))
    assert streams.append(RUN, [_line(2)], None, 1)[0] == [end]
    end += len(_line(2))
    assert streams.append_if(RUN, [_line(3)], end) == [end]
    other.append(RUN, [_line(4)], None, 1)  # moves the end this object remembers
    assert streams.append_if(RUN, [_line(5)], end) is None
    streams.append(RUN, [_line(6)], None, 1)
    assert _read(streams) == [_line(n) for n in (0, 1, 2, 3, 4, 6)]
