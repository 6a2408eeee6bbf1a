"""Retention, prune, delete_for_runs and copy_thread: rewriting a session's run files safely.

A checkpoint is kept whole or dropped. What a kept checkpoint needs from dropped ones is copied
into it, so that it reads back identical: a value its record references in a dropped
checkpoint's record goes into the oldest kept record that uses it (and later kept records are
re-pointed there); for a channel it has a version of but no stored value (a LangGraph
`DeltaChannel` between snapshots), its history (the nearest stored value and the pending writes
after it, as stored: item references, nothing decoded) goes into its record (`histories`), so no
ancestor is kept for it. Each rewritten run file starts with the item records its kept records
reference. Rewrites replace files via temp file + fsync + rename; the index is rebuilt after.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_refs import HISTORIES, chunk_refs, refs_of, text_refs
from checkpointing._saver_store import SessionStore
from checkpointing._saver_walk import raw_histories

Key = tuple[str, str]


def leaves(store: SessionStore) -> set[Key]:
    """Checkpoints no other checkpoint has as parent: every branch's head, pending interrupts included."""
    idx = store.index
    return {k for k in idx.cps if k not in idx.children}


def retain(docs: DocumentBuilder, store: SessionStore, run: str, keep_last: int) -> int:
    """Drop checkpoints of `run` beyond the newest `keep_last` per namespace that nothing needs."""
    idx = store.index
    seeds: set[Key] = {k for k, loc in idx.cps.items() if loc.run != run}
    by_ns: dict[str, list[str]] = {}
    for (ns, cp), loc in idx.cps.items():
        if loc.run == run:
            by_ns.setdefault(ns, []).append(cp)
    for ns, ids in by_ns.items():
        seeds |= {(ns, cp) for cp in sorted(ids)[-keep_last:]}
    keep = seeds | leaves(store) | (store.pins() & set(idx.cps))
    kept_in_run = sum(1 for k in keep if idx.cps[k].run == run)
    if keep != set(idx.cps):
        rewrite(docs, store, keep, runs=affected(store, set(idx.cps) - keep))
    return kept_in_run


def affected(store: SessionStore, dropped: set[Key]) -> set[str]:
    """The runs a drop changes: those holding a dropped checkpoint, and those whose checkpoints
    descend from one (they may reference its values). Walks the index only, reads no record."""
    idx = store.index
    runs = {idx.cps[k].run for k in dropped}
    for (ns, _), loc in idx.cps.items():
        if loc.run in runs or not loc.parent:
            continue
        parent = idx.cps.get((ns, loc.parent))
        if parent is None or parent.run == loc.run:
            continue  # only a run's entry points (a parent in another run) can lead into another run
        cur: str | None = loc.parent
        while cur:
            if (ns, cur) in dropped:
                runs.add(loc.run)
                break
            anc = idx.cps.get((ns, cur))
            cur = anc.parent if anc is not None else None
    return runs


def rewrite(docs: DocumentBuilder, store: SessionStore, keep: set[Key], runs: set[str] | None = None) -> None:
    """Rewrite the runs of `store` keeping only the checkpoints in `keep` and their writes.

    All runs (`runs` None: the item records each keeps are the ones its kept records reference, so
    a run removed takes nothing another needs with it), or only `runs`, which then keep every item
    record they hold (another run may reference them), copied byte for byte."""
    idx = store.index
    per_run: dict[str, list[dict[str, Any]]] = {}
    kept_cps: list[dict[str, Any]] = []
    known = set(idx.cps)
    for run in store.runs() if runs is None else sorted(runs):
        # Writes may land before their checkpoint (LangGraph's async durability): those are kept.
        recs = store.records_at(run, _kept_places(store, run, keep, known))
        per_run[run] = recs
        kept_cps.extend(r for r in recs if r["k"] == "c")
    moved: dict[tuple[str, str, str, str], str] = {}
    replaced: dict[int, dict[str, Any]] = {}
    for rec in sorted(kept_cps, key=lambda r: r["checkpoint_id"]):
        new = _with_histories(docs, store, _rehome(docs, store, rec, keep, moved), keep)
        if new is not rec:
            replaced[id(rec)] = new
    # With several runs, every run's item lines are read before any file is replaced (an item may
    # live in another run). One run's are streamed into its new file as they are read and
    # verified: the only file replaced is renamed after the last of them (a long run's retention
    # then never holds its items all at once).
    planned: list[tuple[str, list[dict[str, Any]], Iterable[bytes]]] = []
    for run, recs in per_run.items():
        out = [replaced.get(id(r), r) for r in recs]
        if runs is None:
            tops = list(dict.fromkeys(h for r in out for h in refs_of(r)))
            inner = [x for h in tops for x in chunk_refs(store.item(h))]
            texts = [t for h in dict.fromkeys(inner + tops) for t in text_refs(store.item(h))]
            hashes = list(dict.fromkeys(texts + inner + tops))
        else:
            hashes = store.items_in(run)
        frames = store.iter_item_frames(hashes)
        planned.append((run, out, frames if len(per_run) == 1 else list(frames)))
    for run, out, head in planned:
        store.replace_run(run, out, head=head)
    del idx
    store.forget()


def _kept_places(store: SessionStore, run: str, keep: set[Key], known: set[Key]) -> list[tuple[int, int]]:
    """Where (offset, line) the checkpoint and writes records of `run` that a rewrite keeps are: the
    kept checkpoints and their writes, and writes whose checkpoint is not stored (yet). The index
    locates every record of the file, so only those are read."""
    idx = store.index
    places = [(loc.off, loc.line) for key, loc in idx.cps.items() if loc.run == run and key in keep]
    for key, wlocs in idx.writes.items():
        if key in keep or key not in known:
            places.extend((w.off, w.line) for w in wlocs if w.run == run)
    return places


def _rehome(
    docs: DocumentBuilder,
    store: SessionStore,
    rec: dict[str, Any],
    keep: set[Key],
    moved: dict[tuple[str, str, str, str], str],
) -> dict[str, Any]:
    """`rec` with the values it used from dropped records moved into it (or into the oldest kept
    record of its own run that took them first: a value never moves into another run)."""
    ns, cp_id, run = rec["checkpoint_ns"], rec["checkpoint_id"], str(rec.get("run_id"))
    task_state = dict(rec["task_state"])
    values = dict(rec.get("values") or {})
    changed = False
    for ch, (ver, home) in rec["task_state"].items():
        if home == cp_id or (ns, home) in keep:
            continue
        target = moved.get((run, ns, ch, home))
        if target is None:
            values[ch] = docs.value(store, ns, rec, ch)
            moved[(run, ns, ch, home)] = cp_id
            target = cp_id
        task_state[ch] = [ver, target]
        changed = True
    if not changed:
        return rec
    return {**rec, "task_state": task_state, "values": values}


def _with_histories(docs: DocumentBuilder, store: SessionStore, rec: dict[str, Any], keep: set[Key]) -> dict[str, Any]:
    """`rec` with the histories of its value-less DeltaChannels when its parent is being dropped."""
    ns, parent = rec["checkpoint_ns"], rec.get("parent_checkpoint_id")
    if not parent or (ns, parent) in keep or (ns, parent) not in store.index.cps:
        return rec  # the parent stays (its chain is walked as before), or went in an earlier pass
    missing = [ch for ch in rec.get("delta_channels") or [] if ch not in rec["task_state"]]
    have = dict(rec.get(HISTORIES) or {})
    todo = [ch for ch in missing if ch not in have]
    if not todo:
        return rec
    have.update(raw_histories(store, ns, rec["checkpoint_id"], todo))
    return {**rec, HISTORIES: have}


def copy_session(source: SessionStore, target: SessionStore, target_thread: str) -> None:
    """Copy every run of `source` into the (empty) session `target`, renaming the session id."""
    for run in source.runs():
        recs = [{**r, "session_id": target_thread} if r["k"] == "c" else r for r in source.all_records(run)]
        target.replace_run(run, recs)
    pins = source.pins()
    if pins:
        target.set_pins(pins)
    target.forget()
