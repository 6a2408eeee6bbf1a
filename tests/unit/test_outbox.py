"""The outbox file: debts in order, settling, emptying, and a damaged file that forgets nothing."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from agent.session.outbox import Outbox, Owed


def test_debts_keep_order_and_collapse_repeats(tmp_path: Path) -> None:
    """One debt per (layer, kind), the newest record's position deciding the order."""
    box = Outbox(tmp_path)
    assert not box.owes("t1", "s1") and box.debts("t1", "s1") == []
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    box.owe("t1", "s1", "L2", Owed.SESSION)
    box.owe("t1", "s1", "SQL", Owed.SESSION)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    got = [(d.layer, d.what) for d in box.debts("t1", "s1")]
    assert got == [("L2", Owed.SESSION), ("SQL", Owed.SESSION), ("SQL", Owed.MESSAGES)]


def test_settle_pays_one_layer_and_empties_the_file_when_nothing_is_left(tmp_path: Path) -> None:
    """Paying SQL leaves L2 owed; paying L2 too truncates the file (a read is then one stat)."""
    box = Outbox(tmp_path)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    box.owe("t1", "s1", "L2", Owed.SESSION)
    sql = [d for d in box.debts("t1", "s1") if d.layer == "SQL"]
    box.settle("t1", "s1", "SQL", max(d.offset for d in sql))
    assert box.pending_layers("t1", "s1") == {"L2"}
    l2 = box.debts("t1", "s1")
    box.settle("t1", "s1", "L2", max(d.offset for d in l2))
    assert box.path("t1", "s1").stat().st_size == 0 and not box.owes("t1", "s1")


def test_a_debt_recorded_after_the_settled_offset_stays_owed(tmp_path: Path) -> None:
    """Settling up to an offset never pays a debt written after it (a write missed during the replay)."""
    box = Outbox(tmp_path)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    upto = box.debts("t1", "s1")[0].offset
    box.owe("t1", "s1", "SQL", Owed.SESSION)
    box.settle("t1", "s1", "SQL", upto)
    assert [(d.layer, d.what) for d in box.debts("t1", "s1")] == [("SQL", Owed.SESSION)]


def test_damaged_outbox_is_kept_aside_and_every_layer_is_owed(tmp_path: Path) -> None:
    """A torn or corrupt line: the file goes to .broken and a full replay of every layer is owed."""
    box = Outbox(tmp_path)
    box.owe("t1", "s1", "SQL", Owed.MESSAGES)
    path = box.path("t1", "s1")
    with path.open("ab") as f:
        f.write(b'{"kind": "owe", "lay')  # a torn tail
    debts = {(d.layer, d.what) for d in box.debts("t1", "s1")}
    assert debts == {(layer, what) for layer in ("SQL", "L2") for what in Owed}
    assert path.with_name(path.name + ".broken").read_bytes().endswith(b'"lay')


def _owe_many(base: str, n: int, layer: str) -> None:
    box = Outbox(base, fsync=False)
    for _ in range(n):
        box.owe("t1", "s1", layer, Owed.MESSAGES)


def test_concurrent_appenders_never_interleave(tmp_path: Path) -> None:
    """Two processes appending at once leave only whole, verifiable records."""
    procs = [multiprocessing.Process(target=_owe_many, args=(str(tmp_path), 200, layer)) for layer in ("SQL", "L2")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    box = Outbox(tmp_path)
    assert {d.layer for d in box.debts("t1", "s1")} == {"SQL", "L2"}
    assert box.path("t1", "s1").read_bytes().count(b"\n") == 400
    assert not box.path("t1", "s1").with_name("outbox.jsonl.broken").exists()
