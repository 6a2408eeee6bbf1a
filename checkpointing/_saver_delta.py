"""The DeltaChannel history fast path: parent walk over the index, reading only what it needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import DeltaChannelHistory

from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_store import SessionStore


def delta_history(
    docs: DocumentBuilder,
    store: SessionStore,
    skey: tuple[str, str],
    ids: dict[str, Any],
    channels: Sequence[str],
) -> Mapping[str, DeltaChannelHistory]:
    """What `BaseCheckpointSaver.get_delta_channel_history` returns, without loading whole tuples."""
    collected: dict[str, list[Any]] = {c: [] for c in channels}
    seeds: dict[str, Any] = {}
    idx = store.index if store.runs_dir.exists() else None
    ns = ids["ns"]
    target = ids["cp_id"] or (idx.latest.get(ns) if idx else None)
    loc = idx.cps.get((ns, target)) if idx and target else None
    cursor = loc.parent if loc else None
    remaining = set(channels)
    while idx is not None and cursor and remaining:
        loc = idx.cps.get((ns, cursor))
        if loc is None:
            break
        for w in reversed(docs.pending_writes(store, ns, cursor, only=remaining)):
            collected[w[1]].append(w)
        for ch in [c for c in remaining if c in loc.channels]:
            seeds[ch] = docs.decode(docs.values.value(skey, store, ns, cursor, ch))
            remaining.discard(ch)
        cursor = loc.parent
    out: dict[str, DeltaChannelHistory] = {}
    for ch in channels:
        entry: DeltaChannelHistory = {"writes": list(reversed(collected[ch]))}
        if ch in seeds:
            entry["seed"] = seeds[ch]
        out[ch] = entry
    return out
