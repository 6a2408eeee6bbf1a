"""`get_delta_channel_history` over the index: the parent walk reads only what it needs.

Each step from a checkpoint to its parent checks that every pending write the checkpoint was
built from (`parent_writes`) is still stored: a lost or torn writes record is an error, never a
silently different history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import DeltaChannelHistory

from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_refs import HISTORIES, check_parent_writes
from checkpointing._saver_store import SessionStore


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
