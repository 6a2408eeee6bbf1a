"""The saver over the PostgreSQL store: damaged rows, long threads, lost connections, setup.

Each test has a schema of its own in the test database (`tests.support.savers.SaverKit`), dropped
after it. The suites shared with the files store are parametrized over both backends
(test_saver.py, test_saver_fencing.py, test_conformance.py); these are PostgreSQL's own.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from checkpointing.exceptions import (
    CheckpointingError,
    CorruptCheckpointError,
)
from checkpointing.layout import checkpoints_file, thread_dir
from checkpointing.saver import JsonlCheckpointSaver
from tests.support.pg_saver_kit import CFG, _cfg, _put, _state
from tests.support.savers import SaverKit, delta_graph

FLIPS = 80


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

    def spy(self: Any, run: str, start: int = 0, first_line: int = 1, limit: int | None = None) -> Any:
        starts.append(start)
        return real(self, run, start, first_line, limit)

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
