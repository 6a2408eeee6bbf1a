"""DeltaChannel histories as stored, found by one walk up a checkpoint's parents.

A checkpoint's history of a channel is the pending writes on its parent chain back to the nearest
checkpoint that stores the channel's value (the seed), or back to a checkpoint whose record holds
the history of the ancestors retention dropped (`HISTORIES`), which ends the walk there. Values
stay as stored (item references unresolved): `_saver_delta` decodes them for LangGraph, retention
copies them into the records it keeps.

Reading every state of a thread (`get_state_history`, or a server walking a thread's parents a
page at a time) asks for the history of each checkpoint, newest first. An ancestor's
history is a part of its child's, so a walk remembers where each checkpoint it passed starts, and
answers for those checkpoints without reading their records again while the session is as it was
(the same index, nothing appended since): each state then costs its decoding, not a walk of up to
a snapshot interval of records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checkpointing._saver_index import SessionIndex
from checkpointing._saver_refs import HISTORIES, check_parent_writes, pending_writes_raw, stored_value
from checkpointing._saver_store import SessionStore
from checkpointing.exceptions import CorruptCheckpointError

_PREFETCH = 32
"""Checkpoints (with their pending writes) a walk reads at a time, one open per run file."""


class HistoryWalk:
    """The histories of `channels` at `target` and at every ancestor the walk passed."""

    def __init__(self, index: SessionIndex, ns: str) -> None:
        self.index = index
        self.ends = dict(index.ends)
        self.ns = ns
        self.writes: dict[str, list[tuple[str, Any]]] = {}  # channel -> (task id, value), newest first
        self.seeds: dict[str, Any] = {}
        # checkpoint passed -> {channel: where its own history starts in `writes`}, for the channels
        # whose walk went on past it (a channel that ended above it has no answer here).
        self.starts: dict[str, dict[str, int]] = {}

    @classmethod
    def run(cls, store: SessionStore, ns: str, target: str, channels: Sequence[str], *, check: bool) -> HistoryWalk:
        """Walk up from `target` until every channel has its seed or the chain ends. With `check`,
        each step checks that the pending writes the child was built from are all still stored
        (`check_parent_writes`): a lost or torn writes record is an error, never another history.
        Records are read `_PREFETCH` checkpoints at a time and not added to the read cache beyond
        the batch in hand (a walk would only push the newest records out)."""
        walk = cls(store.index, ns)
        idx = walk.index
        walk.writes = {ch: [] for ch in channels}
        chain = _ancestors(store, ns, target)
        remaining = list(channels)
        child = store.doc(ns, target)
        if child is None:
            return walk
        walk._passed(target, remaining)
        walk._kept(child, remaining)
        depth, fetched = 0, 0
        while remaining:
            cursor = child.get("parent_checkpoint_id")
            if not cursor or (ns, cursor) not in idx.cps:
                break
            if depth >= fetched and depth < len(chain) and chain[depth] == cursor:
                fetched = depth + _prefetch(store, ns, chain[depth : depth + _PREFETCH])
            depth += 1
            if depth > len(idx.cps):
                raise CorruptCheckpointError(str(store.runs_dir), 0, f"the parents of checkpoint {target} form a loop")
            if check:
                check_parent_writes(store, ns, child)
            doc = store.doc(ns, cursor, cache=False)
            assert doc is not None  # in the index
            for task, ch, enc in reversed(pending_writes_raw(store, ns, cursor, only=set(remaining), cache=False)):
                walk.writes[ch].append((task, enc))
            for ch in [c for c in remaining if c in doc["task_state"]]:
                walk.seeds[ch] = stored_value(store, ns, doc, ch)
                remaining.remove(ch)
            walk._passed(cursor, remaining)
            walk._kept(doc, remaining)
            child = doc
        return walk

    def answers(self, store: SessionStore, ns: str, target: str, channels: Sequence[str]) -> bool:
        """Whether this walk holds `channels`' histories at `target` for the session as it is now."""
        start = self.starts.get(target)
        if start is None or ns != self.ns or not all(ch in start for ch in channels):
            return False
        idx = store.index  # caught up with what other processes appended
        return idx is self.index and idx.ends == self.ends

    def history(self, target: str, ch: str) -> dict[str, Any]:
        """Channel `ch`'s history at `target` as stored: {"writes": [(task id, value), ...] oldest
        first, "seed": value (absent: none)}; no writes when the walk never found `target`."""
        start = self.starts.get(target, {}).get(ch)
        if start is None:
            return {"writes": []}
        out: dict[str, Any] = {"writes": self.writes[ch][start:][::-1]}
        if ch in self.seeds:
            out["seed"] = self.seeds[ch]
        return out

    def _passed(self, cp_id: str, remaining: list[str]) -> None:
        self.starts[cp_id] = {ch: len(self.writes[ch]) for ch in remaining}

    def _kept(self, doc: dict[str, Any], remaining: list[str]) -> None:
        """The histories retention kept in `doc` end those channels' walk."""
        for ch, hist in (doc.get(HISTORIES) or {}).items():
            if ch not in remaining:
                continue
            self.writes[ch].extend((task, enc) for task, enc in reversed(hist.get("writes") or []))
            if "seed" in hist:
                self.seeds[ch] = hist["seed"]
            remaining.remove(ch)


def raw_histories(
    store: SessionStore, ns: str, target: str, channels: Sequence[str], *, check: bool = False
) -> dict[str, dict[str, Any]]:
    """Each of `channels`' history at checkpoint `target` as stored, writes as [task id, value]
    pairs (what retention keeps in a checkpoint whose ancestors it drops); `check` as in
    `HistoryWalk.run`."""
    walk = HistoryWalk.run(store, ns, target, channels, check=check)
    out = {}
    for ch in channels:
        hist = walk.history(target, ch)
        hist["writes"] = [[task, enc] for task, enc in hist["writes"]]
        out[ch] = hist
    return out


def _ancestors(store: SessionStore, ns: str, target: str) -> list[str]:
    """`target`'s ancestors, nearest first, as the index links them (to read them in batches)."""
    idx = store.index
    chain: list[str] = []
    cur = idx.cps[(ns, target)].parent if (ns, target) in idx.cps else None
    while cur and (ns, cur) in idx.cps and len(chain) <= len(idx.cps):
        chain.append(cur)
        cur = idx.cps[(ns, cur)].parent
    return chain


def _prefetch(store: SessionStore, ns: str, batch: list[str]) -> int:
    """Read the records of the checkpoints `batch` and their pending writes; returns how many."""
    places = []
    for cp in batch:
        loc = store.index.cps[(ns, cp)]
        places.append((loc.run, loc.off, loc.line))
        places.extend((w.run, w.off, w.line) for w in store.index.writes.get((ns, cp), []))
    store.prefetch(places)
    return len(batch)
