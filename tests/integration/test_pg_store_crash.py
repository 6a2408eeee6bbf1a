"""The PostgreSQL record store across a crash of its server: what `sync` reports durable is.

Appends under fsync "batch" (the event log's, the tool journal's) commit without waiting for the
WAL flush; `sync` must make them durable before an unsafe tool runs. A commit that writes nothing
does not flush the WAL, so `sync` used to report records durable that a crash restart then lost:
a resumed run found no INTENT for an unsafe tool that had run, and ran it again. And a process
that goes on writing after such a loss must find out, not write an entry whose parent is gone. On a private
server (`tests.support.pg_server`) whose WAL writer waits 10 s, so unflushed commits are really
lost by an immediate (crash) restart.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from checkpointing.entry_log import EventLog
from checkpointing.exceptions import StoreUnavailableError
from checkpointing.records import encode_record
from checkpointing.store.base import EVENTS, JOURNAL
from checkpointing.store.postgres import PostgresStore
from tests.support.pg_server import PgServer, private_postgres

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    """A private server whose unflushed commits stay unflushed (until a synchronous one)."""
    with private_postgres({"wal_writer_delay": "10s"}) as server:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE records")
        PostgresStore(server.url("records")).setup()
        yield server


def _records(pg: PgServer, thread: str, run: str) -> list[bytes]:
    """The stream's records as a new process reads them."""
    store = PostgresStore(pg.url("records"))
    try:
        return [body for _, body in store.session("default", thread, "batch").scan(run).records]
    finally:
        store.close()


def _line(n: int) -> list[bytes]:
    return [encode_record({"n": n})]


def test_what_sync_made_durable_survives_a_crash_restart(pg: PgServer) -> None:
    """Records 1 and 2 synced, 3 not: after a crash restart 1 and 2 are there (3 may be lost)."""
    store = PostgresStore(pg.url("records"))
    streams = store.session("default", "s-sync", "batch")
    for n in (1, 2):
        streams.append(JOURNAL, _line(n), "batch", None)
    streams.sync(JOURNAL)
    streams.append(JOURNAL, _line(3), "batch", None)
    pg.restart("immediate")
    store.close()
    assert _records(pg, "s-sync", JOURNAL)[:2] == [b'{"n":1}', b'{"n":2}']


def test_sync_after_a_crash_never_reports_a_lost_record_durable(pg: PgServer) -> None:
    """The server crashed between an append and its `sync` (the process then got a new
    connection): `sync` either finds the record there (the server had flushed it) or raises
    naming the stream; it used to return as if the lost record were durable."""
    store = PostgresStore(pg.url("records"))
    streams = store.session("default", "s-lost", "batch")
    streams.append(EVENTS, _line(1), "always", None)
    streams.append(EVENTS, _line(2), "batch", None)
    pg.restart("immediate")
    store.pool.check()  # the pool drops its dead connections and opens new ones
    try:
        streams.sync(EVENTS)
    except StoreUnavailableError as err:
        assert "events.jsonl: records this process wrote are gone" in str(err)
        assert _records(pg, "s-lost", EVENTS) == [b'{"n":1}']
    else:
        assert _records(pg, "s-lost", EVENTS) == [b'{"n":1}', b'{"n":2}']
    finally:
        store.close()


def test_an_event_log_that_lost_its_newest_entries_refuses_to_go_on(pg: PgServer) -> None:
    """Entries appended without a flush, then a crash restart: the next append of the same
    process either finds them (the server had flushed them) or raises `StoreUnavailableError`
    saying they are gone; it used to end in `KeyError: parent entry ... is not in ...`."""
    store = PostgresStore(pg.url("records"))
    log = EventLog.over(store.session("default", "s-log", "batch"), store.blobs, fsync="batch")
    log.create({"tenant_id": "default", "session_id": "s-log", "created_at": None})
    first = log.append("note", {"n": 1})
    log.streams.sync(EVENTS)
    second = log.append("note", {"n": 2}, parent_id=first.id)
    pg.restart("immediate")
    store.pool.check()
    try:
        third = log.append("note", {"n": 3}, parent_id=second.id)
    except StoreUnavailableError as err:
        assert "events.jsonl: entries this process wrote are gone" in str(err)
    else:
        assert third.parent_id == second.id
    finally:
        store.close()
