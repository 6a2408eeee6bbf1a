"""The outbox: debts in order, settling, emptying, read-only reads, and a damaged record that
forgets nothing (repaired only by the explicit step). On both stores: the file under base_dir
(`Outbox`) and the `@outbox` stream of the PostgreSQL record store (`StoreOutbox`), through the
`saver_kit` fixture's fresh store of each kind."""

from __future__ import annotations

import logging
import multiprocessing
from pathlib import Path

import pytest

from agent.core.errors import DataCorrupt
from agent.session.outbox import Outbox, Owed, SessionOutbox, StoreOutbox
from tests.support.savers import SaverKit


def _box(kit: SaverKit, fsync: bool = True) -> SessionOutbox:
    """The outbox of the kit's store: files under its base, or the PostgreSQL store's stream."""
    return Outbox(kit.base, fsync=fsync) if kit.kind == "files" else StoreOutbox(kit.store())  # type: ignore[arg-type]


def test_debts_keep_order_and_collapse_repeats(saver_kit: SaverKit) -> None:
    """One debt per (layer, kind), the newest record's position deciding the order."""
    box = _box(saver_kit)
    assert not box.owes("t1", "s1") and box.debts("t1", "s1") == []
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    box.owe("t1", "s1", "L2", Owed.SESSION)
    box.owe("t1", "s1", "SQL", Owed.SESSION)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    got = [(d.layer, d.what) for d in box.debts("t1", "s1")]
    assert got == [("L2", Owed.SESSION), ("SQL", Owed.SESSION), ("SQL", Owed.MESSAGES)]


def test_settle_pays_one_layer_and_empties_the_outbox_when_nothing_is_left(saver_kit: SaverKit) -> None:
    """Paying SQL leaves L2 owed; paying L2 too empties the outbox (a read is then one stat, or one
    lookup of the stream's head)."""
    box = _box(saver_kit)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    box.owe("t1", "s1", "L2", Owed.SESSION)
    sql = [d for d in box.debts("t1", "s1") if d.layer == "SQL"]
    box.settle("t1", "s1", "SQL", max(d.offset for d in sql))
    assert box.pending_layers("t1", "s1") == {"L2"}
    l2 = box.debts("t1", "s1")
    box.settle("t1", "s1", "L2", max(d.offset for d in l2))
    assert not box.owes("t1", "s1") and box.debts("t1", "s1") == []
    if saver_kit.kind == "files":
        assert box.path("t1", "s1").stat().st_size == 0
    else:
        assert saver_kit.sql("SELECT count(*) FROM {s}.jsonl_streams WHERE run = '@outbox'") == [(0,)]


def test_a_debt_recorded_after_the_settled_offset_stays_owed(saver_kit: SaverKit) -> None:
    """Settling up to an offset never pays a debt written after it (a write missed during the replay)."""
    box = _box(saver_kit)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    upto = box.debts("t1", "s1")[0].offset
    box.owe("t1", "s1", "SQL", Owed.SESSION)
    box.settle("t1", "s1", "SQL", upto)
    assert [(d.layer, d.what) for d in box.debts("t1", "s1")] == [("SQL", Owed.SESSION)]


EVERY = {(layer, what) for layer in ("SQL", "L2") for what in Owed}


def test_a_torn_debt_is_read_as_every_debt_and_the_next_append_writes_them(tmp_path: Path) -> None:
    """A record cut off by a crash is an unknown debt: a read counts every debt of every layer and
    changes nothing; the next append moves the torn bytes to .broken and records those debts."""
    box = Outbox(tmp_path)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    path = box.path("t1", "s1")
    with path.open("ab") as f:
        f.write(b'{"_crc":"0a1b2c3d","kind":"owe","lay')  # a torn tail
    before = path.read_bytes()
    assert {(d.layer, d.what) for d in box.debts("t1", "s1")} == EVERY
    assert path.read_bytes() == before and not path.with_name(path.name + ".broken").exists()
    box.owe("t1", "s1", "L2", Owed.SESSION)
    assert path.with_name(path.name + ".broken").read_bytes() == b'{"_crc":"0a1b2c3d","kind":"owe","lay'
    assert {(d.layer, d.what) for d in box.debts("t1", "s1")} == EVERY


def test_a_torn_outbox_converges_once_its_debts_are_replayed(tmp_path: Path) -> None:
    """Settling what each read says is owed (as the manager does) empties the file in a few reads."""
    box = Outbox(tmp_path)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    path = box.path("t1", "s1")
    with path.open("ab") as f:
        f.write(b'{"_crc":"0')
    for _ in range(3):
        debts = box.debts("t1", "s1")
        for layer in {d.layer for d in debts}:
            box.settle("t1", "s1", layer, max(d.offset for d in debts if d.layer == layer))
    assert not box.owes("t1", "s1") and path.stat().st_size == 0


def test_a_damaged_debt_stops_the_read_until_an_explicit_repair(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A complete record whose checksum fails: reads and appends raise naming file, line and
    `agentrt doctor ID --repair`, and change nothing; `repair` keeps the bytes in .broken, owes
    every layer a full replay and logs a warning."""
    box = Outbox(tmp_path)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    box.owe("t1", "s1", "L2", Owed.SESSION)
    path = box.path("t1", "s1")
    damaged = path.read_bytes().replace(b'"SQL"', b'"SQM"')  # one bit: L 0x4c, M 0x4d
    path.write_bytes(damaged)
    with pytest.raises(DataCorrupt, match=r"outbox\.jsonl:1: .*agentrt doctor s1 --repair"):
        box.debts("t1", "s1")
    with pytest.raises(DataCorrupt, match=r"outbox\.jsonl:1"):
        box.owe("t1", "s1", "SQL", Owed.SESSION)
    assert path.read_bytes() == damaged and not path.with_name(path.name + ".broken").exists()
    caplog.set_level(logging.WARNING, "agentrt.sessions")
    done = box.repair("t1", "s1")
    assert done is not None and "outbox.jsonl.broken" in done
    assert path.with_name(path.name + ".broken").read_bytes() == damaged
    assert {(d.layer, d.what) for d in box.debts("t1", "s1")} == EVERY
    assert any(str(path) in r.getMessage() and "line 1" in r.getMessage() for r in caplog.records)
    assert box.repair("t1", "s1") is None  # a file that verifies is left alone


def _owe_many(kind: str, base: str, schema: str, n: int, layer: str) -> None:
    box = SaverKit(kind, Path(base), schema)
    outbox = _box(box, fsync=False)
    for _ in range(n):
        outbox.owe("t1", "s1", layer, Owed.MESSAGES)
    box.close() if kind == "files" else [s.close() for s in box.stores]


def test_concurrent_appenders_never_interleave(saver_kit: SaverKit) -> None:
    """Two processes appending at once leave only whole, verifiable records."""
    args = (saver_kit.kind, str(saver_kit.base), saver_kit.schema, 200)
    procs = [multiprocessing.Process(target=_owe_many, args=(*args, layer)) for layer in ("SQL", "L2")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    box = _box(saver_kit)
    assert {d.layer for d in box.debts("t1", "s1")} == {"SQL", "L2"}
    assert {k: v.changes for k, v in box.behind("t1", "s1").items()} == {"SQL": 200, "L2": 200}
    if saver_kit.kind == "files":
        assert box.path("t1", "s1").read_bytes().count(b"\n") == 400
        assert not box.path("t1", "s1").with_name("outbox.jsonl.broken").exists()


def test_behind_counts_every_unpaid_write_per_layer_since_the_oldest(saver_kit: SaverKit) -> None:
    """Each missed write is one unpaid change; a settle pays them, a later miss counts anew."""
    box = _box(saver_kit)
    assert box.behind("t1", "s1") == {}
    box.owe("t1", "s1", "SQL", Owed.SESSION)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    box.owe("t1", "s1", "L2", Owed.SESSION)
    box.owe("t1", "s1", "SQL", Owed.SESSION)
    lags = box.behind("t1", "s1")
    assert {k: v.changes for k, v in lags.items()} == {"SQL": 3, "L2": 1}
    assert lags["SQL"].since is not None and lags["SQL"].since.endswith("+00:00")
    box.settle("t1", "s1", "SQL", max(d.offset for d in box.debts("t1", "s1") if d.layer == "SQL"))
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    assert {k: v.changes for k, v in box.behind("t1", "s1").items()} == {"L2": 1, "SQL": 1}


def test_due_lists_the_sessions_that_owe_and_forgets_them_once_paid(saver_kit: SaverKit) -> None:
    """The tenant's owing sessions come from its marker folder (or the store's streams); paying
    everything removes the marker (the stream)."""
    box = _box(saver_kit)
    assert box.due("t1") == []
    box.owe("t1", "s2", "SQL", Owed.SESSION)
    box.owe("t1", "s1", "L2", Owed.SESSION)
    box.owe("t2", "s9", "SQL", Owed.SESSION)
    assert box.due("t1") == ["s1", "s2"] and box.due("t2") == ["s9"]
    box.settle("t1", "s1", "L2", box.debts("t1", "s1")[-1].offset)
    assert box.due("t1") == ["s2"]
    if saver_kit.kind == "files":
        assert not (saver_kit.base / "tenants" / "t1" / "outbox-due" / "s1").exists()


def test_a_damaged_row_stops_the_read_until_an_explicit_repair(tmp_path: Path) -> None:
    """PostgreSQL: a row whose checksum fails is refused as a damaged line is (naming the stream,
    the line and `agentrt doctor ID --repair`); the repair owes every layer a full replay."""
    kit = SaverKit.open("postgres", tmp_path)
    try:
        box = StoreOutbox(kit.store())  # type: ignore[arg-type]
        box.owe("t1", "s1", "SQL", Owed.MESSAGES)
        box.owe("t1", "s1", "L2", Owed.SESSION)
        kit.sql(
            "UPDATE {s}.jsonl_records SET line = convert_to(replace(convert_from(line, 'UTF8'), 'SQL', 'SQM'), 'UTF8')"
            " WHERE stream = (SELECT id FROM {s}.jsonl_streams WHERE run = '@outbox') AND pos = 0"
        )
        with pytest.raises(DataCorrupt, match=r"outbox\.jsonl:1: .*agentrt doctor s1 --repair"):
            box.debts("t1", "s1")
        assert box.owes("t1", "s1")  # never read as "nothing owed"
        done = box.repair("t1", "s1")
        assert done is not None and "line 1" in done
        assert {(d.layer, d.what) for d in box.debts("t1", "s1")} == EVERY
        assert box.repair("t1", "s1") is None
    finally:
        kit.close()


def test_a_debt_recorded_on_one_machine_is_owed_on_another(tmp_path: Path) -> None:
    """The PostgreSQL outbox is the store's: a second machine (its own base_dir, its own pool)
    sees the first one's debt and pays it (the files outbox lives under one base_dir)."""
    kit = SaverKit.open("postgres", tmp_path)
    try:
        first, second = _box(kit), StoreOutbox(kit.store())  # type: ignore[arg-type]
        first.owe("t1", "s1", "L2", Owed.SESSION)
        assert second.due("t1") == ["s1"] and second.pending_layers("t1", "s1") == {"L2"}
        second.settle("t1", "s1", "L2", second.debts("t1", "s1")[-1].offset)
        assert not first.owes("t1", "s1") and first.due("t1") == []
    finally:
        kit.close()
