"""The in-memory index of a session's records: where each checkpoint, pending-writes and item
record is (`SessionIndex`), how one record is added to it, and the state a run file's persisted
index holds (`checkpointing.indexfile` stores it; `_saver_store.SessionStore` keeps it current).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson

from checkpointing import indexfile

_DETAILED = 64
"""Checkpoints whose channel homes and versions stay in memory (the newest put or read)."""
log = logging.getLogger(__name__)


@dataclass
class CpLoc:
    """Where a checkpoint record is, plus what reads and retention need without reading it.

    `homes`, `versions` and `missing` are None until read from the record (`SessionStore.detail`)
    when the location came from a persisted index."""

    run: str
    off: int
    line: int
    parent: str | None
    meta_run: str | None
    homes: dict[str, str] | None = None
    versions: dict[str, Any] | None = None
    missing: list[str] | None = None


@dataclass
class WriteLoc:
    """Where one pending-writes record is and which (task_id, idx) keys it holds."""

    run: str
    off: int
    line: int
    task: str
    idxs: list[int]


@dataclass
class SessionIndex:
    """The in-memory index of a session."""

    cps: dict[tuple[str, str], CpLoc] = field(default_factory=dict)
    latest: dict[str, str] = field(default_factory=dict)
    writes: dict[tuple[str, str], list[WriteLoc]] = field(default_factory=dict)
    children: dict[tuple[str, str], int] = field(default_factory=dict)
    # (ns, channel, version as JSON) -> the checkpoint whose record stores that value; built on
    # first use (a put whose parent does not hold a channel's version: rare), kept up to date after
    by_version: dict[tuple[str, str, str], str] | None = None
    # the checkpoints whose homes/versions are in memory, oldest first (see `_DETAILED`)
    detailed: deque[tuple[str, str]] = field(default_factory=deque)
    # content hash -> (run, offset, line) of the item record holding that JSON
    items: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    # run -> item records in that run whose hash `items` locates in another run (a rewrite copies)
    dup_items: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    # run -> (end of the last intact record, records up to there), and where that last record starts
    ends: dict[str, tuple[int, int]] = field(default_factory=dict)
    # run -> the last checkpoint or writes record indexed: (offset, checksum, end, lines up to its
    # end). A persisted index covers the file up to there (an item record is content-addressed, so
    # it could be written again at the same place after a crash: it never vouches for the file)
    lasts: dict[str, tuple[int, str, int, int]] = field(default_factory=dict)
    # run -> how many checkpoints its file holds (retention asks at every put)
    counts: dict[str, int] = field(default_factory=dict)
    # run -> inode of the file indexed: another inode means it was replaced (index from scratch)
    inodes: dict[str, int] = field(default_factory=dict)


def version_key(version: Any) -> str:
    """A version as index key: its JSON, so 5, 5.0 and "5" stay distinct.

    Decoded to a str on purpose: the bytes `orjson.dumps` returns keep the 4 KB buffer they were
    written in, and the index holds one key per stored channel value (about 15 per tool step)."""
    return orjson.dumps(version).decode()


def add_item(idx: SessionIndex, h: str, run: str, off: int, line: int) -> None:
    old = idx.items.get(h)
    if old is not None and old[0] != run:
        idx.dup_items.setdefault(old[0], []).append((h, old[1], old[2]))
    idx.items[h] = (run, off, line)


def fill_detail(idx: SessionIndex, loc: CpLoc, rec: dict[str, Any]) -> None:
    """Complete `loc` from its checkpoint record; only the newest `_DETAILED` stay complete (the
    others are read again when asked for: a long run's index must not hold every checkpoint's maps)."""
    key = (rec["checkpoint_ns"], rec["checkpoint_id"])
    loc.homes = {ch: h for ch, (_, h) in rec["task_state"].items()}
    loc.versions = rec["channel_versions"]
    loc.missing = [ch for ch in rec.get("delta_channels", []) if ch not in loc.homes]
    idx.detailed.append(key)
    while len(idx.detailed) > _DETAILED:
        old = idx.cps.get(idx.detailed.popleft())
        if old is not None and old is not loc:
            old.homes = old.versions = old.missing = None


def versions_into(by_version: dict[tuple[str, str, str], str], ns: str, cp_id: str, rec: dict[str, Any]) -> None:
    for ch, (ver, home) in rec["task_state"].items():
        if home == cp_id:
            by_version[(ns, ch, version_key(ver))] = cp_id


def apply_record(idx: SessionIndex, run: str, off: int, line: int, rec: dict[str, Any], fill: bool = False) -> None:
    """Index one record; a checkpoint's homes and versions only when `fill` (a put: the next put
    asks for its parent's), else read from the record when first needed (`SessionStore.detail`)."""
    if rec["k"] == "i":
        add_item(idx, rec["h"], run, off, line)
        return
    ns, cp_id = rec["checkpoint_ns"], rec["checkpoint_id"]
    if rec["k"] == "c":
        parent = rec.get("parent_checkpoint_id")
        if (ns, cp_id) not in idx.cps:
            idx.counts[run] = idx.counts.get(run, 0) + 1
        loc = idx.cps[(ns, cp_id)] = CpLoc(run, off, line, parent, rec.get("run_id_meta"))
        if fill:
            fill_detail(idx, loc, rec)
        if idx.by_version is not None:
            versions_into(idx.by_version, ns, cp_id, rec)
        if parent:
            idx.children[(ns, parent)] = idx.children.get((ns, parent), 0) + 1
        if cp_id > idx.latest.get(ns, ""):
            idx.latest[ns] = cp_id
    else:
        idxs = [int(w[0]) for w in rec["writes"]]
        idx.writes.setdefault((ns, cp_id), []).append(WriteLoc(run, off, line, str(rec["task_id"]), idxs))


def restore(idx: SessionIndex, run: str, snap: indexfile.Snapshot, label: object) -> bool:
    """Index run file `run` from its persisted index `snap`; False (and nothing indexed) when the
    index is not of the shape `saved_state` gives (`label` names the file in the warning)."""
    try:
        state = snap.state
        cps = [
            (str(ns), str(cp), int(off), int(line), parent, meta) for ns, cp, off, line, parent, meta in state["cps"]
        ]
        writes = [
            (str(ns), str(cp), WriteLoc(run, int(off), int(line), str(task), [int(i) for i in idxs]))
            for ns, cp, off, line, task, idxs in state["writes"]
        ]
        items = [(str(h), int(off), int(line)) for h, off, line in state["items"]]
        last = (int(state["last"][0]), str(state["last"][1]), snap.end, snap.lines)
    except (KeyError, TypeError, ValueError) as err:
        log.warning("index of %s has an unknown shape (%s): scanning the file", label, err)
        return False
    for ns, cp_id, off, line, parent, meta_run in cps:
        idx.cps[(ns, cp_id)] = CpLoc(run, off, line, parent, meta_run)
        idx.counts[run] = idx.counts.get(run, 0) + 1
        if parent:
            idx.children[(ns, parent)] = idx.children.get((ns, parent), 0) + 1
        if cp_id > idx.latest.get(ns, ""):
            idx.latest[ns] = cp_id
    for ns, cp_id, w in writes:
        idx.writes.setdefault((ns, cp_id), []).append(w)
    for h, off, line in items:
        add_item(idx, h, run, off, line)
    idx.lasts[run] = last
    idx.ends[run] = (snap.end, snap.lines)
    return True


def saved_state(idx: SessionIndex, run: str) -> tuple[dict[str, Any], list[int]]:
    """What run file `run`'s persisted index holds (up to its last checkpoint or writes record), and
    the offsets of the checkpoint records that vouch for the file with that last one (the first, the
    middle and a late one)."""
    last, crc, end, _ = idx.lasts[run]
    cps = [
        [ns, cp, c.off, c.line, c.parent, c.meta_run] for (ns, cp), c in idx.cps.items() if c.run == run and c.off < end
    ]
    writes = [
        [ns, cp, w.off, w.line, w.task, w.idxs]
        for (ns, cp), ws in idx.writes.items()
        for w in ws
        if w.run == run and w.off < end
    ]
    items = [[h, loc[1], loc[2]] for h, loc in idx.items.items() if loc[0] == run and loc[1] < end]
    items += [list(d) for d in idx.dup_items.get(run, ()) if d[1] < end]
    offs = sorted(c.off for c in idx.cps.values() if c.run == run and c.off < last)
    picks = sorted({offs[0], offs[len(offs) // 2], offs[-1]}) if offs else []
    return {"cps": cps, "writes": writes, "items": items, "last": [last, crc]}, picks
