"""The PostgreSQL store's append against what must not overlap it, with a real append in flight.

An append is in flight while a transaction of its own has called `jsonl_append` and not committed
yet (a connection of the test's, the statement the store sends). What runs meanwhile on the store
(raising the fence, rewriting the stream, a conditional append) waits for it or collides with it;
the test sees that wait in `pg_stat_activity`, then commits the append and checks what was kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import psycopg
import pytest

from checkpointing.exceptions import StaleFencingTokenError
from checkpointing.records import frame
from checkpointing.store.postgres import PostgresSessionStreams
from tests.support.savers import DATABASE_URL, SaverKit

TENANT, THREAD, RUN = "acme", "s1", "main"


def _line(n: int) -> bytes:
    return frame(orjson.dumps({"n": n}))


def _streams(pg: SaverKit) -> PostgresSessionStreams:
    store: Any = pg.store()
    return store.session(TENANT, THREAD, "always")  # type: ignore[no-any-return]


@contextmanager
def _in_flight(pg: SaverKit, statement: str, params: tuple[Any, ...]) -> Iterator[psycopg.Connection[Any]]:
    """`statement` run in a transaction left open until the block ends (then committed)."""
    with psycopg.connect(DATABASE_URL, prepare_threshold=None) as conn:
        conn.execute(statement.replace("{s}", f'"{pg.schema}"'), params)  # type: ignore[arg-type]
        yield conn
        conn.commit()


def _append_in_flight(pg: SaverKit, line: bytes, token: int) -> Any:
    return _in_flight(pg, "CALL {s}.jsonl_append(%s, %s, %s, %s, %s, NULL, false)", (TENANT, THREAD, RUN, token, line))


def _waiting(pg: SaverKit, call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """`call` in a thread, returned once its statement waits for a lock held by another transaction."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except Exception as err:
            out["error"] = err

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position(%s in query) > 0"
        " AND pid <> pg_backend_pid()"
    )
    for _ in range(1200):  # polled until it waits: nothing is asserted about how long that takes
        if pg.sql(query, (pg.schema,))[0][0] or not worker.is_alive():
            break
        time.sleep(0.05)
    assert worker.is_alive(), f"it did not wait for the transaction in flight: {out}"
    return worker, out


def test_a_fence_raised_during_an_append_waits_for_it_and_refuses_the_next(pg: SaverKit) -> None:
    streams = _streams(pg)
    streams.append(RUN, [_line(0)], None, 1)
    with _append_in_flight(pg, _line(1), 1):
        worker, out = _waiting(pg, lambda: streams.advance_fence(2))
        assert pg.raw(THREAD, RUN, TENANT) == _line(0)
    worker.join()
    assert "error" not in out
    assert pg.raw(THREAD, RUN, TENANT) == _line(0) + _line(1)  # the append in flight landed before it
    assert streams.highest_fence() == 2
    with pytest.raises(StaleFencingTokenError):
        streams.append(RUN, [_line(2)], None, 1)
    assert pg.raw(THREAD, RUN, TENANT) == _line(0) + _line(1)


def test_an_append_waiting_for_a_fence_raise_in_flight_is_refused_once_it_commits(pg: SaverKit) -> None:
    streams = _streams(pg)
    streams.append(RUN, [_line(0)], None, 1)
    key = (TENANT, THREAD)
    with _in_flight(pg, streams.q["fence"].decode().replace(f'"{pg.schema}"', "{s}"), (*key, *key, 2)):
        worker, out = _waiting(pg, lambda: streams.append(RUN, [_line(1)], None, 1))
    worker.join()
    assert isinstance(out.get("error"), StaleFencingTokenError)
    assert pg.raw(THREAD, RUN, TENANT) == _line(0)
    streams.append(RUN, [_line(2)], None, 2)  # the new owner appends at the stream's end
    assert pg.raw(THREAD, RUN, TENANT) == _line(0) + _line(2)


def test_a_rewrite_waits_for_an_append_in_flight_and_leaves_no_row_of_the_old_stream(pg: SaverKit) -> None:
    streams = _streams(pg)
    streams.append(RUN, [_line(0)], None, 1)
    with _append_in_flight(pg, _line(1), 1):
        worker, out = _waiting(pg, lambda: streams.replace(RUN, [_line(7)]))
    worker.join()
    assert "error" not in out
    assert pg.raw(THREAD, RUN, TENANT) == _line(7)
    orphans = pg.sql(
        "SELECT count(*) FROM {s}.jsonl_records r WHERE r.stream NOT IN (SELECT id FROM {s}.jsonl_streams)"
    )
    assert orphans == [(0,)]


def test_a_conditional_append_racing_an_append_in_flight_for_the_same_end_writes_nothing(pg: SaverKit) -> None:
    streams = _streams(pg)
    streams.append(RUN, [_line(0)], None, 1)
    end = len(_line(0))
    with _append_in_flight(pg, _line(1), 1):
        worker, out = _waiting(pg, lambda: streams.append_if(RUN, [_line(5), _line(6)], end))
    worker.join()
    assert out == {"value": None}
    assert pg.raw(THREAD, RUN, TENANT) == _line(0) + _line(1)
    assert streams.append_if(RUN, [_line(5)], end + len(_line(1))) == [end + len(_line(1))]


def test_a_fence_raised_during_an_append_at_a_known_end_waits_for_it_and_refuses_the_next(pg: SaverKit) -> None:
    streams = _streams(pg)
    streams.append(RUN, [_line(0)], None, 1)
    sid = pg.sql("SELECT id FROM {s}.jsonl_streams WHERE run = %s", (RUN,))[0][0]
    statement = "CALL {s}.jsonl_append_at(%s, %s, %s, %s, %s, %s, false)"
    with _in_flight(pg, statement, (TENANT, THREAD, 1, sid, len(_line(0)), _line(1))):
        worker, out = _waiting(pg, lambda: streams.advance_fence(2))
        assert pg.raw(THREAD, RUN, TENANT) == _line(0)
    worker.join()
    assert "error" not in out
    assert pg.raw(THREAD, RUN, TENANT) == _line(0) + _line(1)  # the append in flight landed before it
    with pytest.raises(StaleFencingTokenError):
        streams.append(RUN, [_line(2)], None, 1)  # at the end it remembers, with the old token
    assert pg.raw(THREAD, RUN, TENANT) == _line(0) + _line(1)
