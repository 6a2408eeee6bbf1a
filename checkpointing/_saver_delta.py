"""`get_delta_channel_history` over the index: the parent walk reads only what it needs.

Each step from a checkpoint to its parent checks that every pending write the checkpoint was
built from (`parent_writes`) is still stored: a lost or torn writes record is an error, never a
silently different history. The session's last walk is kept (`SessionStore.walk`) and answers
for the ancestors it passed while the session is unchanged (`HistoryWalk`), so reading a thread's
states newest first walks once per snapshot interval, not once per state. Every answer is decoded
afresh: a caller may change what it got.
"""

from __future__ import annotations

from collections.abc import Sequence

from langgraph.checkpoint.base import DeltaChannelHistory

from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_store import SessionStore
from checkpointing._saver_walk import HistoryWalk


def delta_history(
    docs: DocumentBuilder, store: SessionStore, ns: str, target: str | None, channels: Sequence[str]
) -> dict[str, DeltaChannelHistory]:
    """Per channel: the writes on the parent chain of `target` (oldest first) and the nearest seed."""
    if target is None:
        return {ch: {"writes": []} for ch in channels}
    walk = store.walk
    if not (isinstance(walk, HistoryWalk) and walk.answers(store, ns, target, channels)):
        walk = store.walk = HistoryWalk.run(store, ns, target, channels, check=True)
    hists = {ch: walk.history(target, ch) for ch in channels}
    encs = [enc for h in hists.values() for enc in ([h["seed"]] if "seed" in h else []) + [e for _, e in h["writes"]]]
    values = iter(docs.load_all(encs, store))
    out: dict[str, DeltaChannelHistory] = {}
    for ch, hist in hists.items():
        seed = next(values) if "seed" in hist else None
        entry: DeltaChannelHistory = {"writes": [(task, ch, next(values)) for task, _ in hist["writes"]]}
        if "seed" in hist:
            entry["seed"] = seed
        out[ch] = entry
    return out
