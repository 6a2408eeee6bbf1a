"""`get_delta_channel_history` over the index: the parent walk reads only what it needs.

Each step from a checkpoint to its parent checks that every pending write the checkpoint was
built from (`parent_writes`) is still stored: a lost or torn writes record is an error, never a
silently different history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import DeltaChannelHistory

from checkpointing._saver_docs import HISTORIES, DocumentBuilder
from checkpointing._saver_store import SessionStore
from checkpointing.errors import CorruptCheckpointError


def check_parent_writes(store: SessionStore, ns: str, child: dict[str, Any]) -> None:
    """Raise when a pending write that checkpoint `child` was built from is not stored."""
    parent = child.get("parent_checkpoint_id")
    wanted = child.get("parent_writes") or []
    if not parent or not wanted:
        return
    have = {(w.task, i) for w in store.index.writes.get((ns, parent), []) for i in w.idxs}
    lost = [f"{t}/{i}" for t, i in wanted if (t, i) not in have]
    if lost:
        loc = store.index.cps.get((ns, child["checkpoint_id"]))
        where = str(store.run_file(loc.run)) if loc else str(store.runs_dir)
        raise CorruptCheckpointError(
            where,
            loc.line if loc else 0,
            f"checkpoint {child['checkpoint_id']} was built from pending writes {', '.join(lost[:5])} "
            f"of checkpoint {parent}, which are not stored",
        )


def delta_history(
    docs: DocumentBuilder, store: SessionStore, ns: str, target: str | None, channels: Sequence[str]
) -> dict[str, DeltaChannelHistory]:
    """Per channel: the writes on the parent chain of `target` (oldest first) and the nearest seed."""
    collected: dict[str, list[Any]] = {c: [] for c in channels}
    seeds: dict[str, Any] = {}
    idx = store.index
    child = store.doc(ns, target) if target else None
    remaining = set(channels)
    if child is not None:
        _kept_histories(docs, store, child, remaining, collected, seeds)
    while child is not None and remaining:
        cursor = child.get("parent_checkpoint_id")
        if not cursor or (ns, cursor) not in idx.cps:
            break
        check_parent_writes(store, ns, child)
        doc = store.doc(ns, cursor)
        assert doc is not None
        for w in reversed(docs.pending_writes(store, ns, cursor, only=remaining)):
            collected[w[1]].append(w)
        for ch in [c for c in remaining if c in doc["task_state"]]:
            seeds[ch] = docs.load(docs.value(store, ns, doc, ch), store)
            remaining.discard(ch)
        _kept_histories(docs, store, doc, remaining, collected, seeds)
        child = doc
    out: dict[str, DeltaChannelHistory] = {}
    for ch in channels:
        entry: DeltaChannelHistory = {"writes": list(reversed(collected[ch]))}
        if ch in seeds:
            entry["seed"] = seeds[ch]
        out[ch] = entry
    return out


def _kept_histories(
    docs: DocumentBuilder,
    store: SessionStore,
    doc: dict[str, Any],
    remaining: set[str],
    collected: dict[str, list[Any]],
    seeds: dict[str, Any],
) -> None:
    """The histories retention stored in `doc` (its dropped ancestors' part) end those channels' walk."""
    for ch, hist in (doc.get(HISTORIES) or {}).items():
        if ch not in remaining:
            continue
        for task, enc in reversed(hist.get("writes") or []):
            collected[ch].append((task, ch, docs.load(enc, store)))
        if "seed" in hist:
            seeds[ch] = docs.load(hist["seed"], store)
        remaining.discard(ch)


def raw_history(docs: DocumentBuilder, store: SessionStore, ns: str, target: str, ch: str) -> dict[str, Any]:
    """Channel `ch`'s DeltaChannel history at checkpoint `target` as stored (values encoded, item
    references unresolved): what retention keeps in a checkpoint whose ancestors it drops."""
    writes: list[list[Any]] = []
    hist: dict[str, Any] = {}
    child = store.doc(ns, target)
    while child is not None:
        kept = (child.get(HISTORIES) or {}).get(ch)
        if kept is not None:
            writes.extend(reversed(kept.get("writes") or []))
            if "seed" in kept:
                hist["seed"] = kept["seed"]
            break
        cursor = child.get("parent_checkpoint_id")
        if not cursor or (ns, cursor) not in store.index.cps:
            break
        doc = store.doc(ns, cursor)
        assert doc is not None
        writes.extend([t, enc] for t, _, enc in reversed(docs.pending_writes_raw(store, ns, cursor, only={ch})))
        if ch in doc["task_state"]:
            hist["seed"] = docs.value(store, ns, doc, ch)
            break
        child = doc
    hist["writes"] = list(reversed(writes))
    return hist
