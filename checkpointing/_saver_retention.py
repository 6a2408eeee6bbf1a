"""Retention, prune, delete_for_runs and copy_thread: rewriting a session's run files safely.

What a kept checkpoint needs: for every channel it has a version of but no stored value (a
LangGraph `DeltaChannel` between snapshots), every ancestor back to the one that stores the
channel, because their pending writes are the channel's history (its delta base). Values it
references in a dropped checkpoint's record are copied into the oldest kept record that uses
them (and later kept records re-pointed there), so every kept checkpoint reads back identical.
Each rewritten run file starts with the item records its kept records reference.
Rewrites replace files via temp file + fsync + rename; the index is rebuilt after.
"""

from __future__ import annotations

from typing import Any

from checkpointing._saver_docs import DocumentBuilder, chunk_refs, refs_of, text_refs
from checkpointing._saver_store import ITEM_SCHEMA_VERSION, SessionStore

Key = tuple[str, str]


def closure(store: SessionStore, seeds: set[Key]) -> set[Key]:
    """`seeds` plus the ancestors their value-less channels need (back to each channel's seed)."""
    idx = store.index
    keep: set[Key] = set()
    for key in seeds:
        if key not in idx.cps:
            continue
        loc = store.detail(key)
        keep.add(key)
        need = set(loc.missing or ())
        ns, cur = key[0], loc.parent
        while need and cur:
            if (ns, cur) not in idx.cps:
                break
            anc = store.detail((ns, cur))
            keep.add((ns, cur))
            need -= set(anc.homes or ())
            cur = anc.parent
    return keep


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
    seeds |= leaves(store) | (store.pins() & set(idx.cps))
    keep = closure(store, seeds)
    kept_in_run = sum(1 for k in keep if idx.cps[k].run == run)
    if keep != set(idx.cps):
        rewrite(docs, store, keep)
    return kept_in_run


def rewrite(docs: DocumentBuilder, store: SessionStore, keep: set[Key]) -> None:
    """Rewrite every run of `store` keeping only the checkpoints in `keep` and their writes."""
    idx = store.index
    per_run: dict[str, list[dict[str, Any]]] = {}
    kept_cps: list[dict[str, Any]] = []
    known = set(idx.cps)
    for run in store.runs():
        # Writes may land before their checkpoint (LangGraph's async durability): those are kept.
        recs = [
            r
            for r in store.all_records(run, items=False)
            if r["k"] != "i" and ((key := (r["checkpoint_ns"], r["checkpoint_id"])) in keep or key not in known)
        ]
        per_run[run] = recs
        kept_cps.extend(r for r in recs if r["k"] == "c")
    moved: dict[tuple[str, str, str], str] = {}
    replaced: dict[int, dict[str, Any]] = {}
    for rec in sorted(kept_cps, key=lambda r: r["checkpoint_id"]):
        new = _rehome(docs, store, rec, keep, moved)
        if new is not rec:
            replaced[id(rec)] = new
    for run, recs in per_run.items():
        out = [replaced.get(id(r), r) for r in recs]
        tops = list(dict.fromkeys(h for r in out for h in refs_of(r)))
        inner = [x for h in tops for x in chunk_refs(store.item(h))]
        texts = [t for h in dict.fromkeys(inner + tops) for t in text_refs(store.item(h))]
        hashes = list(dict.fromkeys(texts + inner + tops))
        items = [{"k": "i", "schema_version": ITEM_SCHEMA_VERSION, "h": h, "v": store.item(h)} for h in hashes]
        store.replace_run(run, items + out)
    del idx
    store.forget()


def _rehome(
    docs: DocumentBuilder,
    store: SessionStore,
    rec: dict[str, Any],
    keep: set[Key],
    moved: dict[tuple[str, str, str], str],
) -> dict[str, Any]:
    ns, cp_id = rec["checkpoint_ns"], rec["checkpoint_id"]
    task_state = dict(rec["task_state"])
    values = dict(rec.get("values") or {})
    changed = False
    for ch, (ver, home) in rec["task_state"].items():
        if home == cp_id or (ns, home) in keep:
            continue
        target = moved.get((ns, ch, home))
        if target is None:
            values[ch] = docs.value(store, ns, rec, ch)
            moved[(ns, ch, home)] = cp_id
            target = cp_id
        task_state[ch] = [ver, target]
        changed = True
    if not changed:
        return rec
    return {**rec, "task_state": task_state, "values": values}


def copy_session(source: SessionStore, target: SessionStore, target_thread: str) -> None:
    """Copy every run of `source` into the (empty) session `target`, renaming the session id."""
    for run in source.runs():
        recs = [{**r, "session_id": target_thread} if r["k"] == "c" else r for r in source.all_records(run)]
        target.replace_run(run, recs)
    pins = source.pins()
    if pins:
        target.set_pins(pins)
    target.forget()
