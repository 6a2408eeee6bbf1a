"""The saver over the PostgreSQL store: damaged rows, long threads, lost connections, setup.

Each test has a schema of its own in the test database (`tests.support.savers.SaverKit`), dropped
after it. The suites shared with the files store are parametrized over both backends
(test_saver.py, test_saver_fencing.py, test_conformance.py); these are PostgreSQL's own.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpointing.exceptions import (
    CheckpointingError,
    CorruptCheckpointError,
    StaleFencingTokenError,
    StoreUnavailableError,
)
from checkpointing.layout import checkpoints_file, thread_dir
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.store.pg_schema import MIGRATIONS, ddl
from checkpointing.store.postgres import PostgresStore
from tests.integration.test_stores_support import free_port
from tests.support.savers import DATABASE_URL, SaverKit, delta_graph

CFG: Any = {"configurable": {"thread_id": "s1", "tenant_id": "acme"}}
FLIPS = 80


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[SaverKit]:
    """A kit over a fresh PostgreSQL schema."""
    kit = SaverKit.open("postgres", tmp_path)
    yield kit
    kit.close()


def _state(saver: JsonlCheckpointSaver) -> Any:
    history = [(h.values, h.next, h.metadata) for h in delta_graph(saver).get_state_history(CFG)]
    return history, [(t.checkpoint, t.pending_writes) for t in saver.list(CFG)]


def _cfg(thread: str, parent: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if parent:
        conf["checkpoint_id"] = parent
    return {"configurable": conf}


def _put(saver: JsonlCheckpointSaver, thread: str, parent: str | None, i: int) -> str:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = {"count": i, "note": f"step {i}"}
    cp["channel_versions"] = {"count": i + 1, "note": i + 1}
    new = {"count": i + 1, "note": i + 1}
    return str(saver.put(_cfg(thread, parent), cp, {"source": "loop", "step": i}, new)["configurable"]["checkpoint_id"])


def test_rows_are_the_lines_of_the_files_store(pg: SaverKit, tmp_path: Path) -> None:
    """Each row is one framed JSONL line; the rows in order, written as checkpoints.jsonl, read
    back through the files store as the same state."""
    saver = pg()
    delta_graph(saver).invoke({"messages": [HumanMessage("go")], "n": 0}, CFG)
    rows = pg.sql("SELECT line FROM {s}.jsonl_records ORDER BY stream, pos")
    assert rows and all(bytes(r[0]).count(b"\n") == 1 and bytes(r[0]).endswith(b"\n") for r in rows)
    files = tmp_path / "files"
    path = checkpoints_file(thread_dir(files, "acme", "s1"), "main")
    path.parent.mkdir(parents=True)
    path.write_bytes(pg.raw("s1", tenant="acme"))
    assert _state(JsonlCheckpointSaver(files)) == _state(pg())


def test_single_bit_flips_in_rows_are_refused_naming_stream_and_line(pg: SaverKit) -> None:
    """A one-bit flip in any record row makes a read raise an error naming the stream and line,
    or read back exactly the original state; the row is never changed by the read."""
    saver = pg()
    delta_graph(saver).invoke({"messages": [HumanMessage("go")], "n": 0}, CFG)
    original = _state(pg())
    rows = pg.sql("SELECT stream, pos, line FROM {s}.jsonl_records ORDER BY stream, pos")
    total = sum(len(bytes(r[2])) for r in rows)
    rnd = random.Random("pg-flips")
    detected = 0
    for at in sorted({0, total - 1, *(rnd.randrange(total) for _ in range(FLIPS))}):
        line_no, acc = 0, 0
        for line_no, (stream, pos, line) in enumerate(rows, 1):  # noqa: B007
            if at < acc + len(bytes(line)):
                break
            acc += len(bytes(line))
        good = bytes(line)
        bad = bytearray(good)
        bad[at - acc] ^= 1 << rnd.randrange(8)
        pg.sql("UPDATE {s}.jsonl_records SET line = %s WHERE stream = %s AND pos = %s", (bytes(bad), stream, pos))
        try:
            got = _state(pg())
        except CheckpointingError as err:
            detected += 1
            assert "tenants/acme/sessions/s1/runs/main" in str(err), str(err)
            if isinstance(err, CorruptCheckpointError):
                assert err.line == line_no, (str(err), line_no)
        else:
            assert got == original, f"flip at byte {at} read back as different state"
        assert bytes(pg.sql("SELECT line FROM {s}.jsonl_records WHERE stream = %s AND pos = %s",
                            (stream, pos))[0][0]) == bytes(bad)  # fmt: skip
        pg.sql("UPDATE {s}.jsonl_records SET line = %s WHERE stream = %s AND pos = %s", (good, stream, pos))
    assert detected > FLIPS // 2


def test_a_damaged_pins_row_is_refused(pg: SaverKit) -> None:
    """The pins document is a framed line too: a flipped bit is an error naming it, never other pins."""
    saver = pg()
    first = _put(saver, "s1", None, 0)
    saver.pin(_cfg("s1", first))
    assert saver._store("default", "s1").pins() == {("", first)}
    pg.sql("UPDATE {s}.jsonl_documents SET body = overlay(body placing '\\x41'::bytea from 20 for 1)")
    with pytest.raises(CorruptCheckpointError, match=r"pins\.json"):
        pg()._store("default", "s1").pins()


def test_pins_from_two_savers_are_both_kept(pg: SaverKit) -> None:
    """pin() is a compare-and-swap: two savers pinning different checkpoints keep both."""
    one, two = pg(), pg()
    a = _put(one, "s1", None, 0)
    b = _put(one, "s1", a, 1)
    assert one._store("default", "s1").pins() == set()
    assert two._store("default", "s1").pins() == set()
    one.pin(_cfg("s1", a))
    two.pin(_cfg("s1", b))
    assert pg()._store("default", "s1").pins() == {("", a), ("", b)}


def test_a_5000_step_thread_reads_back_whole(pg: SaverKit) -> None:
    """Every checkpoint of a 5,000-step thread comes back from list() (newest first) and by id,
    from a fresh saver (LangGraph's PostgresSaver once lost history past 1,024 rows)."""
    saver = pg(fsync="batch")
    ids: list[str] = []
    parent: str | None = None
    for i in range(5000):
        parent = _put(saver, "long", parent, i)
        ids.append(parent)
    saver.flush()
    fresh = pg()
    listed = list(fresh.list(_cfg("long")))
    assert [t.checkpoint["id"] for t in listed] == ids[::-1]
    assert [t.checkpoint["channel_values"]["count"] for t in listed] == list(range(4999, -1, -1))
    first = fresh.get_tuple(_cfg("long", ids[0]))
    assert first is not None and first.checkpoint["channel_values"] == {"count": 0, "note": "step 0"}
    latest = fresh.get_tuple(_cfg("long"))
    assert latest is not None and latest.checkpoint["id"] == ids[-1] and latest.parent_config is not None


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


def test_ids_that_look_like_sql_are_only_data(pg: SaverKit) -> None:
    """Thread and checkpoint ids with quotes and SQL are bound parameters: stored and read as given."""
    saver = pg()
    weird = "s1'); DROP TABLE jsonl_records; --\"é"
    first = _put(saver, weird, None, 0)
    got = pg().get_tuple(_cfg(weird))
    assert got is not None and got.checkpoint["id"] == first
    assert [t for _, t in pg.store().threads()] == [weird]
    saver.delete_thread(weird)
    assert pg.sql("SELECT count(*) FROM {s}.jsonl_records") == [(0,)]


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


def test_a_new_saver_reads_the_index_row_and_scans_only_the_tail(pg: SaverKit, monkeypatch: Any) -> None:
    """After save_indexes, a new saver scans the stream only past the index row; a damaged or stale
    index row is ignored (the whole stream is scanned) and reads stay the same."""
    from checkpointing.store.postgres import PostgresSessionStreams

    saver = pg()
    parent: str | None = None
    for i in range(50):
        parent = _put(saver, "s1", parent, i)
    saver.save_indexes()
    tail = _put(saver, "s1", parent, 50)
    starts: list[int] = []
    real = PostgresSessionStreams.scan

    def spy(self: Any, run: str, start: int = 0, first_line: int = 1) -> Any:
        starts.append(start)
        return real(self, run, start, first_line)

    monkeypatch.setattr(PostgresSessionStreams, "scan", spy)
    expected = [t.checkpoint["id"] for t in saver.list(_cfg("s1"))]
    assert [t.checkpoint["id"] for t in pg().list(_cfg("s1"))] == expected and expected[0] == tail
    assert len(starts) == 1 and starts[0] > 0  # only the tail past the index
    name = "runs/main/checkpoints.jsonl.idx"
    pg.sql("UPDATE {s}.jsonl_documents SET body = overlay(body placing '\\x41'::bytea from 30 for 1) WHERE name = %s",
           (name,))  # fmt: skip
    starts.clear()
    assert [t.checkpoint["id"] for t in pg().list(_cfg("s1"))] == expected
    assert starts == [0]
    saver.delete_for_runs(["other"])  # nothing to drop: the index row stays
    saver.prune(["s1"])  # a rewrite drops the stream's index row with it
    assert pg.sql("SELECT count(*) FROM {s}.jsonl_documents WHERE name = %s", (name,)) == [(0,)]
    assert [t.checkpoint["id"] for t in pg().list(_cfg("s1"))] == [tail]


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
