"""Blobs through the store, one test body for both backends (`Store.blobs`).

`files` keeps them under `base_dir/blobs/sha256/` (`BlobStore`), `postgres` as rows of
`jsonl_blobs` in a schema of the test's own (`PostgresBlobStore`). Damage is made the way it would
happen: a byte of the blob file changed, or the row's body changed by an UPDATE. A saver over
PostgreSQL keeps its large values in the database: nothing is written to the working folder.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpointing.blobs import BLOB_KEY, Blobs, BlobStore
from checkpointing.exceptions import BlobCorruptError, BlobMissingError, StoreUnavailableError
from checkpointing.layout import blobs_root
from checkpointing.records import frame
from checkpointing.store import FileStore, Store
from tests.support.savers import DATABASE_URL, KINDS, SaverKit


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SaverKit]:
    """A fresh store of each kind: a folder, or a PostgreSQL schema of its own."""
    kit = SaverKit.open(request.param, tmp_path)
    yield kit
    kit.close()


def _copies(kit: SaverKit) -> list[Any]:
    """What holds blob bytes: every file under the blobs folder, or every row."""
    if kit.kind == "files":
        root = blobs_root(kit.base)
        return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
    return kit.sql("SELECT ref, size FROM {s}.jsonl_blobs ORDER BY ref")


def _flip_first_byte(kit: SaverKit, store: Store, ref: str) -> None:
    """Damage the stored copy of `ref` (same length), behind the store's back."""
    if kit.kind == "files":
        assert isinstance(store.blobs, BlobStore)
        path = store.blobs.path_for(ref)
        data = bytearray(path.read_bytes())
        data[0] ^= 0x01
        path.write_bytes(bytes(data))
        return
    kit.sql("UPDATE {s}.jsonl_blobs SET body = set_byte(body, 0, get_byte(body, 0) # 1) WHERE ref = %s", (ref,))


def _put_in_child(kind: str, base: str, schema: str, data: bytes, out: Any) -> None:
    """A process of its own putting `data` through a store it opens (spawned: nothing inherited)."""
    store: Store
    if kind == "files":
        store = FileStore(base)
    else:
        from checkpointing.store.postgres import PostgresStore

        store = PostgresStore(DATABASE_URL, schema=schema, max_connections=1)
    try:
        out.put(store.blobs.put(data))
    finally:
        store.close()


def test_a_blob_reads_back_as_put_and_is_stored_once(backend: SaverKit) -> None:
    """put returns `sha256:<hex>` of the bytes; get returns them; the same bytes put twice (also
    through another store object) give the same ref and one stored copy; ref_obj embeds the ref."""
    store = backend.store()
    data = b"a tool result " * 1000
    ref = store.blobs.put(data)
    assert ref == "sha256:" + hashlib.sha256(data).hexdigest()
    assert store.blobs.get(ref) == data
    assert backend.store().blobs.put(data) == ref
    assert store.blobs.ref_obj(data) == {BLOB_KEY: ref, "size": len(data)}
    assert len(_copies(backend)) == 1
    assert backend.store().blobs.get(ref) == data
    assert list(store.blobs.refs()) == [ref]


def test_exists_and_delete(backend: SaverKit) -> None:
    """exists says whether a blob is stored; delete frees its bytes once, then reads fail as missing."""
    blobs: Blobs = backend.store().blobs
    data = os.urandom(3000)
    ref = blobs.put(data)
    assert blobs.exists(ref)
    assert blobs.delete(ref) == len(data)
    assert not blobs.exists(ref)
    assert blobs.delete(ref) == 0
    assert _copies(backend) == []
    with pytest.raises(BlobMissingError, match="is missing"):
        blobs.get(ref)
    with pytest.raises(BlobMissingError, match="invalid blob reference"):
        blobs.get("sha256:../../etc/passwd")


def test_a_damaged_blob_is_refused_never_returned(backend: SaverKit) -> None:
    """One changed byte in the stored copy: get raises BlobCorruptError naming the blob."""
    store = backend.store()
    data = b'{"rows": ' + b"1, " * 5000 + b"2}"
    ref = store.blobs.put(data)
    _flip_first_byte(backend, store, ref)
    with pytest.raises(BlobCorruptError, match=f"blob {ref} at .* does not match its digest"):
        store.blobs.get(ref)
    with pytest.raises(BlobCorruptError):
        backend.store().blobs.get(ref)


def test_two_processes_putting_the_same_bytes_at_once_both_succeed(backend: SaverKit) -> None:
    """Two processes put the same 2 MB at once: both get its ref, one copy is stored, it reads back."""
    data = os.urandom(2 << 20)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_put_in_child, args=(backend.kind, str(backend.base), backend.schema, data, out))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    refs = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    want = "sha256:" + hashlib.sha256(data).hexdigest()
    assert refs == [want, want]
    assert len(_copies(backend)) == 1
    assert backend.store().blobs.get(want) == data


def test_a_5_mb_blob(backend: SaverKit) -> None:
    """A 5 MB blob is stored whole and read back verified."""
    data = os.urandom(5 << 20)
    store = backend.store()
    ref = store.blobs.put(data)
    assert backend.store().blobs.get(ref) == data
    if backend.kind == "postgres":
        assert backend.sql("SELECT size, octet_length(body) FROM {s}.jsonl_blobs") == [(len(data), len(data))]


def test_a_postgres_saver_writes_nothing_to_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A saver over PostgreSQL given values far above the inline limits (a long text, bytes, a
    large write, a stored text) writes no file; a new saver reads every value back."""
    kit = SaverKit.open("postgres", tmp_path / "kit")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    try:
        saver = kit()
        cfg: Any = {"configurable": {"thread_id": "big", "checkpoint_ns": "", "tenant_id": "acme"}}
        text = "a long tool result " * 20_000
        raw = os.urandom(300_000)
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=-1))
        cp["channel_values"] = {"text": text, "raw": raw}
        cp["channel_versions"] = {"text": 1, "raw": 1}
        saved = saver.put(cfg, cp, {"source": "loop", "step": 0}, {"text": 1, "raw": 1})
        saver.put_writes(saved, [("text", text + "!")], "task-1")
        ref = saver.put_text(cfg, text + "?")
        assert ref is not None
        saver.flush()

        again = kit()
        got = again.get_tuple(saved)
        assert got is not None
        assert got.checkpoint["channel_values"] == {"text": text, "raw": raw}
        assert [w[1:] for w in got.pending_writes or []] == [("text", text + "!")]
        assert again.get_text(cfg, ref) == text + "?"
        assert list(cwd.iterdir()) == []
        assert not (tmp_path / "kit").exists()
    finally:
        kit.close()


def test_an_event_log_spills_large_payloads_into_postgres_blobs(tmp_path: Path) -> None:
    """An event log given the PostgreSQL store's blobs spills a payload above its inline limit
    into a row, not into base_dir/blobs, and reads it back."""
    from checkpointing.entry_log import EventLog

    kit = SaverKit.open("postgres", tmp_path / "kit")
    try:
        blobs: Any = kit.store().blobs  # EventLog is annotated with the files BlobStore
        base = tmp_path / "base"
        log = EventLog(base, "acme", "s1", inline_payload_max_bytes=1024, blobs=blobs)
        log.create({"tenant_id": "acme", "session_id": "s1"})
        payload = {"result": "x" * 50_000}
        entry = log.append("tool_result", payload)
        assert not blobs_root(base).exists()
        assert len(_copies(kit)) == 1
        again = EventLog(base, "acme", "s1", blobs=kit.store().blobs)
        assert again.entry(entry.id).payload == payload
    finally:
        kit.close()


def test_setup_adds_the_blob_table_to_a_schema_made_before_it(tmp_path: Path) -> None:
    """A schema set up by a release without blobs (only the first migration ran) gets the blob
    table and every later change from setup(), its records kept and appended to; a store used
    without setup says what to run."""
    from checkpointing.store.pg_schema import MIGRATIONS, MIGRATIONS_TABLE
    from checkpointing.store.postgres import PostgresStore

    kit = SaverKit("postgres", tmp_path, schema=f"t_old_{os.getpid()}_{uuid6().hex[:12]}")
    try:
        kit.sql("CREATE SCHEMA {s}")
        kit.sql(MIGRATIONS_TABLE.replace("{schema}", "{s}"))
        kit.sql(MIGRATIONS[0].replace("{schema}", "{s}"))
        kit.sql("INSERT INTO {s}.jsonl_store_migrations (v) VALUES (0)")
        old = kit.store()
        line = frame(b'{"v":1}')
        kit.sql(  # a record as that release appended it
            "WITH a AS (INSERT INTO {s}.jsonl_streams (tenant, thread, run, end_pos, lines)"
            " VALUES ('default', 't1', 'run-1', %s, 1) RETURNING id)"
            " INSERT INTO {s}.jsonl_records (stream, pos, line) SELECT id, 0, %s FROM a",
            (len(line), line),
        )
        with pytest.raises(StoreUnavailableError, match=r"jsonl_blobs is missing; run PostgresStore.setup\(\)"):
            old.blobs.put(b"x")
        store = PostgresStore(DATABASE_URL, schema=kit.schema, max_connections=1)
        kit.stores.append(store)
        store.setup()
        assert old.blobs.get(old.blobs.put(b"x" * 5000)) == b"x" * 5000
        streams = store.session("default", "t1", "always")
        assert [off for off, _ in streams.scan("run-1").records] == [0]
        assert streams.append("run-1", [line], None, None)[0] == [len(line)]
        assert streams.dump()[0] == {"run-1": line + line}
        assert kit.sql("SELECT v FROM {s}.jsonl_store_migrations ORDER BY v") == [(v,) for v in range(len(MIGRATIONS))]
    finally:
        kit.close()


def test_postgres_blobs_work_behind_pgbouncer_in_transaction_mode(pgbouncer: str, tmp_path: Path) -> None:
    """Through PgBouncer (transaction pooling): put, get, exists, list and delete all work."""
    from checkpointing.store.postgres import PostgresStore

    kit = SaverKit.open("postgres", tmp_path)
    store = PostgresStore(pgbouncer, schema=kit.schema, max_connections=4)
    try:
        data = os.urandom(100_000)
        refs = {store.blobs.put(data + bytes([i])) for i in range(20)}
        assert all(store.blobs.get(r)[:-1] == data for r in refs) and set(store.blobs.refs()) == refs
        assert sum(store.blobs.delete(r) for r in refs) == 20 * (len(data) + 1)
        assert _copies(kit) == []
    finally:
        store.close()
        kit.close()
