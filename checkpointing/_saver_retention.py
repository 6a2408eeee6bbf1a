"""Retention, prune, delete_for_runs and copy_thread: rewriting a session's run files safely.

What a checkpoint needs: the documents its `ref` and `d` entries point at (transitively), and,
for LangGraph `DeltaChannel` channels (named in `counters_since_delta_snapshot` metadata), every
ancestor back to the one that stores the channel (its `_DeltaSnapshot`), because their pending
writes are the channel's history. Rewrites replace files via temp file + fsync + rename, then
rebuild the index; a record that loses what it points at is first materialized (`{"w": ...}`).
"""

from __future__ import annotations

import shutil
from typing import Any

from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_state import size_of
from checkpointing._saver_store import CHECKPOINTS, WRITES, SessionStore
from checkpointing.errors import CorruptCheckpointError, CorruptRecordError
from checkpointing.records import atomic_write, encode_record, read_records_with_offsets

Key = tuple[str, str]


def _delta_channels(meta: Any) -> set[str]:
    counters = meta.get("counters_since_delta_snapshot") if isinstance(meta, dict) else None
    return set(counters) if isinstance(counters, dict) else set()


def _targets(entry: dict[str, Any]) -> list[str]:
    """Checkpoint ids a task_state entry points at."""
    out = [t for t in (entry.get("ref"), entry.get("d")) if t]
    return out + list(entry.get("pw") or [])


def closure(docs: DocumentBuilder, store: SessionStore, seeds: set[Key], follow_refs: bool = True) -> set[Key]:
    """`seeds` plus every document they need.

    Needs are tracked per (document, channel): a delta needs its base for that channel and the
    pending writes it points at; a reference to a small value (<= the inline limit) needs
    nothing, since the rewrite copies such a value into the referring document. DeltaChannel
    channels need every ancestor back to the one that stores them. With `follow_refs=False`
    only the DeltaChannel rule applies (everything else is materialized by the rewrite).
    """
    idx = store.index
    keep: set[Key] = set()
    seen: set[tuple[str, str, str]] = set()
    stack: list[tuple[Key, str | None]] = [(k, None) for k in seeds]
    while stack:
        key, channel = stack.pop()
        if key not in idx.cps:
            continue
        doc = store.doc(*key)
        if doc is None:
            continue
        ns = key[0]
        if key not in keep:
            keep.add(key)
            for w in idx.writes.get(key, []):
                stack.extend(((ns, d), "") for d in w.dl if (ns, d) not in keep)
            missing = _delta_channels(doc.get("metadata")) - set(idx.cps[key].channels)
            parent = idx.cps[key].parent
            if missing and parent:
                stack.append(((ns, parent), None))
        if not follow_refs:
            continue
        # None: every channel of the document; "": the record only (its writes or delta items).
        channels = list(doc["task_state"]) if channel is None else [channel] if channel else []
        for ch in channels:
            if (ns, key[1], ch) in seen:
                continue
            seen.add((ns, key[1], ch))
            entry = doc["task_state"].get(ch) or {}
            if entry.get("ref") and not _is_small(docs, store, ns, entry["ref"], ch):
                stack.append(((ns, entry["ref"]), ch))
            if entry.get("d"):
                stack.append(((ns, entry["d"]), ch))
            stack.extend(((ns, p), "") for p in entry.get("pw") or [])
    return keep


def _is_small(docs: DocumentBuilder, store: SessionStore, ns: str, cp_id: str, ch: str) -> bool:
    doc = store.doc(ns, cp_id)
    entry = (doc or {}).get("task_state", {}).get(ch) or {}
    return "w" in entry and size_of(entry["w"]) <= docs.inline_max


def retain(docs: DocumentBuilder, store: SessionStore, run: str, keep_last: int) -> int:
    """Drop the checkpoints of `run` beyond the newest `keep_last` per namespace that nothing needs."""
    idx = store.index
    seeds: set[Key] = {k for k, loc in idx.cps.items() if loc.run != run}
    by_ns: dict[str, list[str]] = {}
    for (ns, cp), loc in idx.cps.items():
        if loc.run == run:
            by_ns.setdefault(ns, []).append(cp)
    for ns, ids in by_ns.items():
        seeds |= {(ns, cp) for cp in sorted(ids)[-keep_last:]}
    seeds |= store.pins() & set(idx.cps)
    keep = closure(docs, store, seeds)
    if keep != set(idx.cps):
        rewrite(docs, store, keep, materialize=True)
    return sum(1 for k in keep if idx.cps.get(k) is not None and idx.cps[k].run == run)


def _read_all(path: Any) -> list[dict[str, Any]]:
    try:
        return [r for _, r in read_records_with_offsets(path, repair=True)]
    except CorruptRecordError as err:
        raise CorruptCheckpointError(err.path, err.line, err.reason) from err


def rewrite(docs: DocumentBuilder, store: SessionStore, keep: set[Key], materialize: bool) -> None:
    """Rewrite every run of `store` keeping only `keep` (and their writes)."""
    skey = (store.dir.parent.parent.name, store.dir.name)
    plans: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    runs = sorted(p.name for p in store.runs_dir.iterdir() if p.is_dir())
    for run in runs:
        cps = []
        for rec in _read_all(store.run_file(run, CHECKPOINTS)):
            key = (rec["checkpoint_ns"], rec["checkpoint_id"])
            if key not in keep:
                continue
            if materialize:
                rec = _materialized(docs, store, skey, rec, keep)
            cps.append(rec)
        writes = [
            _writes_materialized(docs, store, r, keep) if materialize else r
            for r in _read_all(store.run_file(run, WRITES))
            if (r["checkpoint_ns"], r["checkpoint_id"]) in keep
        ]
        plans[run] = (cps, writes)
    for run, (cps, writes) in plans.items():
        if not cps:
            shutil.rmtree(store.runs_dir / run, ignore_errors=True)
            continue
        atomic_write(store.run_file(run, CHECKPOINTS), b"".join(encode_record(r) for r in cps))
        atomic_write(store.run_file(run, WRITES), b"".join(encode_record(r) for r in writes))
    store.forget_logs()
    store.rebuild_index()


def _materialized(
    docs: DocumentBuilder, store: SessionStore, skey: tuple[str, str], rec: dict[str, Any], keep: set[Key]
) -> dict[str, Any]:
    ns = rec["checkpoint_ns"]
    changed = {}
    for ch, entry in rec["task_state"].items():
        if any((ns, t) not in keep for t in _targets(entry)):
            changed[ch] = {"w": docs.values.value(skey, store, ns, rec["checkpoint_id"], ch)}
    if not changed:
        return rec
    return {**rec, "task_state": {**rec["task_state"], **changed}}


def _writes_materialized(
    docs: DocumentBuilder, store: SessionStore, rec: dict[str, Any], keep: set[Key]
) -> dict[str, Any]:
    ns = rec["checkpoint_ns"]
    if all((ns, d) in keep for d in rec.get("dl", [])):
        return rec
    rows = [[idx, ch, docs.resolve_dl(store, ns, enc)] for idx, ch, enc in rec["writes"]]
    out = {k: v for k, v in rec.items() if k != "dl"}
    out["writes"] = rows
    return out


def copy_session(source: SessionStore, target: SessionStore, target_thread: str) -> None:
    """Copy every run of `source` into the (empty) session `target`, renaming the session id."""
    if not source.runs_dir.exists():
        return
    for run_dir in sorted(p for p in source.runs_dir.iterdir() if p.is_dir()):
        cps = [{**r, "session_id": target_thread} for r in _read_all(run_dir / CHECKPOINTS)]
        writes = _read_all(run_dir / WRITES)
        atomic_write(target.run_file(run_dir.name, CHECKPOINTS), b"".join(encode_record(r) for r in cps))
        atomic_write(target.run_file(run_dir.name, WRITES), b"".join(encode_record(r) for r in writes))
    pins = source.pins()
    if pins:
        target.set_pins(pins)
    target.rebuild_index()
