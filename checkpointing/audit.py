"""Read-only audits of a session's checkpoint records as its run files hold them, for an inspector.

An inspector (the doctor) has read and verified every run file itself (`records.scan`); these
answer from those records alone, with no saver and no LangGraph:

- `dangling_references`: the item records and value homes that checkpoint and pending-writes
  records reference but no run file holds (a checkpoint that names them cannot be read back);
- `newest_document`: the newest intact root checkpoint record, as `JsonlCheckpointSaver.get_document`
  shows it, for when the saver itself cannot read the thread.

The record layout is `checkpointing._saver_docs`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from checkpointing._saver_format import task_pairs
from checkpointing._saver_refs import chunk_refs, metadata_json, refs_of, text_refs
from checkpointing.tail import NeedsGraph

__all__ = ["RunLog", "dangling_references", "newest_document"]

RunLog = tuple[Path, Sequence[dict[str, Any]]]
"""A run file's path and its intact records in file order (the first is on line 1)."""


def dangling_references(logs: Sequence[RunLog]) -> list[str]:
    """Item records and value homes that checkpoint / writes records reference but no run file
    holds, one line each naming the hash or channel and the referencing record (`path:line`)."""
    items: dict[str, Any] = {}
    cps: set[tuple[str, str]] = set()
    for _, recs in logs:
        for rec in recs:
            if rec.get("k") == "i":
                items[str(rec.get("h"))] = rec.get("v")
            elif rec.get("k") == "c":
                cps.add((str(rec.get("checkpoint_ns")), str(rec.get("checkpoint_id"))))
    out: list[str] = []
    for path, recs in logs:
        for line, rec in enumerate(recs, 1):
            if rec.get("k") not in ("c", "w"):
                continue
            where = f"{path}:{line} ({'checkpoint' if rec['k'] == 'c' else 'pending writes of'} "
            where += f"{rec.get('checkpoint_id')})"
            refs = refs_of(rec)
            refs += [h for r in refs if r in items for h in chunk_refs(items[r])]
            refs += [t for r in refs if r in items for t in text_refs(items[r])]
            out += [f"item {h} missing, referenced by {where}" for h in dict.fromkeys(refs) if h not in items]
            if rec["k"] == "c":
                ns = str(rec.get("checkpoint_ns"))
                for ch, (_, home) in task_pairs(rec).items():
                    if home != rec.get("checkpoint_id") and (ns, str(home)) not in cps:
                        out.append(f"value of {ch!r} stored at checkpoint {home} missing, referenced by {where}")
    return out


def newest_document(logs: Sequence[RunLog], decode: Callable[[Any], Any]) -> dict[str, Any] | None:
    """The newest intact root checkpoint record, without its values, its metadata and runtime
    snapshot decoded by `decode` (both `{}` when either cannot be: evidence only, the pins are then
    unknown; a `NeedsGraph` from `decode` is raised). None when no run file holds one."""
    docs = [rec for _, recs in logs for rec in recs if rec.get("k") == "c" and (rec.get("checkpoint_ns") or "") == ""]
    newest = max(docs, key=lambda d: str(d.get("checkpoint_id") or ""), default=None)
    if newest is None:
        return None
    items = {rec.get("h"): rec.get("v") for _, recs in logs for rec in recs if rec.get("k") == "i"}
    out = {k: v for k, v in newest.items() if k not in ("values", "k")}
    try:
        out["metadata"] = decode(metadata_json(newest.get("metadata") or {}, items.__getitem__))
        out["runtime_snapshot"] = decode(metadata_json(newest.get("runtime_snapshot") or {}, items.__getitem__))
    except NeedsGraph:
        raise
    except Exception:  # evidence only: an undecodable record leaves the pins unknown
        out["metadata"], out["runtime_snapshot"] = {}, {}
    return out
