"""The saver over the PostgreSQL store: setup, its DDL, lost and unreachable connections, PgBouncer,
and writers racing on one thread. Each test has a schema of its own (`tests.support.pg_saver_kit`).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from checkpointing.exceptions import (
    StaleFencingTokenError,
    StoreUnavailableError,
)
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.store.pg_schema import MIGRATIONS, ddl
from checkpointing.store.postgres import PostgresStore
from tests.integration.test_stores_support import free_port
from tests.support.pg_saver_kit import _cfg, _put
from tests.support.savers import DATABASE_URL, SaverKit, delta_graph


def test_a_connection_killed_mid_put_leaves_no_half_written_record(pg: SaverKit) -> None:
    """A put whose connection is terminated after it advanced the stream, before its rows were in,
    leaves the stream exactly as before; the saver then reads and writes on."""
    saver = pg()
    first = _put(saver, "s1", None, 0)
    before = pg.raw("s1")
    errors: list[BaseException] = []
    with psycopg.connect(DATABASE_URL, autocommit=False) as locker:
        locker.execute(f'LOCK TABLE "{pg.schema}".jsonl_records IN EXCLUSIVE MODE')

        def put() -> None:
            try:
                _put(saver, "s1", first, 1)
            except BaseException as err:
                errors.append(err)

        writer = threading.Thread(target=put)
        writer.start()
        blocked: list[Any] = []
        for _ in range(200):  # the put's INSERT waits for the lock once its UPDATE ran
            blocked = pg.sql(
                "SELECT l.pid FROM pg_locks l WHERE NOT l.granted AND l.relation = %s::regclass",
                (f'"{pg.schema}".jsonl_records',),
            )
            if blocked:
                break
            time.sleep(0.05)
        assert blocked, "the put never reached its INSERT"
        pending = pg.sql("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND state = 'active'", (blocked[0][0],))
        assert pending[0][0] == 1
        pg.sql("SELECT pg_terminate_backend(%s)", (blocked[0][0],))
        locker.rollback()
    writer.join(30)
    assert len(errors) == 1 and isinstance(errors[0], StoreUnavailableError), errors
    assert "committed whole or not at all" in str(errors[0])
    assert pg.raw("s1") == before
    assert pg.sql("SELECT coalesce(sum(length(line)), 0) FROM {s}.jsonl_records")[0][0] == len(before)
    fresh = pg()
    got = fresh.get_tuple(_cfg("s1"))
    assert got is not None and got.checkpoint["id"] == first
    again = _put(saver, "s1", first, 1)
    latest = pg().get_tuple(_cfg("s1"))
    assert latest is not None and latest.checkpoint["id"] == again


def test_setup_is_safe_twice_and_from_two_threads_at_once(tmp_path: Path) -> None:
    """setup() on a new schema from two threads at once, then again: every call succeeds."""
    kit = SaverKit("postgres", tmp_path, schema=f"t_setup_{int(time.time() * 1e6)}")
    try:
        stores = [kit.store(), kit.store()]
        errors: list[BaseException] = []

        def run(s: Any) -> None:
            try:
                s.setup()
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=run, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        stores[0].setup()  # type: ignore[attr-defined]
        assert kit.sql("SELECT v FROM {s}.jsonl_store_migrations ORDER BY v") == [(v,) for v in range(len(MIGRATIONS))]
        saver = kit()
        assert saver.get_tuple(_cfg("s1", _put(saver, "s1", None, 0))) is not None
    finally:
        kit.close()


def test_ddl_is_what_setup_runs(pg: SaverKit) -> None:
    """The plain SQL for an Alembic migration creates the same tables as setup()."""
    other = f"{pg.schema}_ddl"
    try:
        pg.sql(f'CREATE SCHEMA "{other}"')
        for stmt in ddl(other):
            pg.sql(stmt)
        q = "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = %s"
        mine = sorted(pg.sql(q + " AND table_name <> 'jsonl_store_migrations'", (pg.schema,)))
        assert mine and sorted(pg.sql(q, (other,))) == mine
    finally:
        pg.sql(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')


def test_an_unreachable_database_is_a_clear_error() -> None:
    """A store whose database does not answer raises StoreUnavailableError naming it."""
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{free_port()}/test", timeout=1)
    try:
        with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1"):
            JsonlCheckpointSaver(store=store).get_tuple(_cfg("s1"))
    finally:
        store.close()


def test_the_saver_works_behind_pgbouncer_in_transaction_mode(pgbouncer: str, pg: SaverKit) -> None:
    """Through PgBouncer (transaction pooling, 2 server connections shared by 8 client ones):
    setup, graphs on two threads at once, fencing, pins and reads all work."""
    store = PostgresStore(pgbouncer, schema=pg.schema, max_connections=4)
    try:
        store.setup()
        saver = JsonlCheckpointSaver(store=store)
        other = JsonlCheckpointSaver(store=PostgresStore(pgbouncer, schema=pg.schema, max_connections=4))
        errors: list[BaseException] = []

        def run(s: JsonlCheckpointSaver, thread: str) -> None:
            try:
                cfg = {"configurable": {"thread_id": thread, "fencing_token": 1}}
                delta_graph(s).invoke({"messages": [HumanMessage("go")], "n": 0}, cfg)
            except BaseException as err:  # handed to the test thread
                errors.append(err)

        workers = [threading.Thread(target=run, args=(s, t)) for s, t in ((saver, "a"), (other, "b"))]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        assert errors == []
        for thread in ("a", "b"):
            state = delta_graph(pg()).get_state({"configurable": {"thread_id": thread}})
            assert state.values["n"] == 4 and len(state.values["messages"]) == 8
        store.session("default", "a", "always").advance_fence(5)
        stale = {"configurable": {"thread_id": "a", "checkpoint_ns": "", "fencing_token": 1}}
        with pytest.raises(StaleFencingTokenError):
            saver.put(stale, empty_checkpoint(), {"source": "loop", "step": 9}, {})
        latest = saver.get_tuple(_cfg("a"))
        assert latest is not None
        saver.pin(latest.config)
        assert pg()._store("default", "a").pins() == {("", latest.checkpoint["id"])}
        other.store.close()
    finally:
        store.close()


def test_from_url_opens_either_store(tmp_path: Path) -> None:
    """from_url: a postgresql:// URL is the PostgreSQL store (tables created), a folder the files store."""
    schema = f"t_url_{os.getpid()}_{int(time.time() * 1000)}"
    saver = JsonlCheckpointSaver.from_url(DATABASE_URL, schema=schema)
    try:
        first = _put(saver, "s1", None, 0)
        assert isinstance(saver.store, PostgresStore) and saver.base_dir is None
        again = JsonlCheckpointSaver.from_url(DATABASE_URL, schema=schema)
        got = again.get_tuple(_cfg("s1"))
        again.close()
        assert got is not None and got.checkpoint["id"] == first
    finally:
        saver.close()
        with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    files = JsonlCheckpointSaver.from_url(tmp_path / "state")
    _put(files, "s1", None, 0)
    assert (tmp_path / "state" / "tenants" / "default" / "sessions" / "s1" / "runs" / "main").is_dir()


def test_two_writers_appending_to_one_thread_at_once_lose_nothing(pg: SaverKit) -> None:
    """Two savers (own pools, as two processes) appending to the same thread from two threads at
    once: every checkpoint of both is read back, the rows stay contiguous (positions in commit
    order), and each writer reads the other's checkpoints afterwards."""
    writers = [JsonlCheckpointSaver(store=pg.store()), JsonlCheckpointSaver(store=pg.store())]
    made: list[list[str]] = [[], []]
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            parent: str | None = None
            for i in range(40):
                parent = _put(writers[k], "shared", parent, 1000 * k + i)
                made[k].append(parent)
        except BaseException as err:  # handed to the test thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    everything = sorted(made[0] + made[1], reverse=True)
    for reader in (pg(), *writers):
        assert [t.checkpoint["id"] for t in reader.list(_cfg("shared"))] == everything
    rows = pg.sql("SELECT pos, length(line) FROM {s}.jsonl_records ORDER BY pos")
    assert all(pos == prev + size for (pos, _), (prev, size) in zip(rows[1:], rows, strict=False))
    assert rows[0][0] == 0 and sum(size for _, size in rows) == rows[-1][0] + rows[-1][1]


def test_a_new_owner_raising_the_fence_waits_for_an_append_in_flight(pg: SaverKit) -> None:
    """An append holds the fence it checked until it commits: a new owner's token raised meanwhile
    waits for it, and the old owner's next append is then refused, nothing of it written."""
    from checkpointing.records import frame

    store: Any = pg.store()
    old, new = store.session("default", "f1", "always"), store.session("default", "f1", "always")
    line = frame(b'{"n":0}')
    old.append("run-1", [line], None, 1)
    done: list[str] = []
    with psycopg.connect(DATABASE_URL, autocommit=False) as locker:
        locker.execute(f'LOCK TABLE "{pg.schema}".jsonl_records IN EXCLUSIVE MODE')
        appending = threading.Thread(target=lambda: done.append(str(old.append("run-1", [line], None, 1)[0])))
        appending.start()
        for _ in range(200):  # the append waits at its insert, the fence checked and held
            if pg.sql("SELECT 1 FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
                      (f'"{pg.schema}".jsonl_records',)):  # fmt: skip
                break
            time.sleep(0.05)
        raising = threading.Thread(target=lambda: (new.advance_fence(2), done.append("raised")))
        raising.start()
        time.sleep(1.0)
        assert raising.is_alive() and done == []
        locker.rollback()
    appending.join(30)
    raising.join(30)
    # Both were waiting: once released, the append commits first (the raise waited for its fence
    # lock), but which thread reports first is the scheduler's choice.
    assert sorted(done) == sorted([str([len(line)]), "raised"])
    with pytest.raises(StaleFencingTokenError):
        old.append("run-1", [line], None, 1)
    assert new.dump()[0] == {"run-1": line + line}
