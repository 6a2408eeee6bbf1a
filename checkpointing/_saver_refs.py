"""The references inside stored checkpoint records, resolved with the record store alone.

Item references (`{"$i": hash}`), chunk references (`{"$c": hash}`), shared metadata (`{"$m":
hash}`) and a checkpoint's pending writes as stored: what `DocumentBuilder` (which rebuilds
LangGraph values) and the read-only tools that need no LangGraph (`checkpointing.tail`) share.
See `_saver_docs` for the record layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from checkpointing._saver_store import SessionStore
from checkpointing.exceptions import CorruptCheckpointError

TAG = "$t"
"""The key of a tagged value (`checkpointing.codec`)."""
_CONTAINER_TAGS = frozenset({"delta_snapshot", "tuple", "set", "frozenset", "overwrite", "deque"})
ITEM_KEY = "$i"
CHUNK_KEY = "$c"
META_KEY = "$m"
HISTORIES = "histories"
"""A checkpoint record's DeltaChannel histories that retention kept when it dropped the ancestors
they came from: {channel: {"seed": stored value (absent: none), "writes": [[task_id, stored value],
...] oldest first}}, what `get_delta_channel_history` returns for the channel at this checkpoint."""


def writes_sort_key(task_path: str, task_id: str = "", idx: int = 0) -> tuple[str, str, int]:
    """The order LangGraph applies a super-step's writes in (its `writes_sort_key`)."""
    return (task_path, task_id, idx)


def resolve(enc: Any, store: SessionStore) -> Any:
    """The inverse of `DocumentBuilder.spill`: item references replaced by the JSON they stand for."""
    if isinstance(enc, list):
        return _unchunk(enc, store)
    if isinstance(enc, dict):
        if _is_ref(enc):
            return store.item(enc[ITEM_KEY])
        if TAG not in enc:
            return {k: _deref(x, store) for k, x in enc.items()}
        if enc[TAG] in _CONTAINER_TAGS and isinstance(enc.get("v"), list):
            return {**enc, "v": _unchunk(enc["v"], store)}
    return enc


def pending_writes_raw(
    store: SessionStore, ns: str, cp_id: str, only: set[str] | None = None, cache: bool = True
) -> list[tuple[str, str, Any]]:
    """A checkpoint's pending writes (task id, channel, value as stored), in LangGraph's order:
    the first ordinary write per (task, idx), the last special one (read without `cache`: see
    `SessionStore.doc`)."""
    merged: dict[tuple[str, int], tuple[str, str, Any, str]] = {}
    for rec in store.writes_records(ns, cp_id, cache):
        task, path = rec["task_id"], rec.get("task_path", "")
        for idx, ch, enc in rec["writes"]:
            key = (task, idx)
            if idx >= 0 and key in merged:
                continue
            merged[key] = (task, ch, enc, path)
    rows = sorted(merged.items(), key=lambda kv: writes_sort_key(kv[1][3], kv[0][0], kv[0][1]))
    return [(t, ch, enc) for (_, (t, ch, enc, _)) in rows if only is None or ch in only]


def _is_ref(x: Any) -> bool:
    return isinstance(x, dict) and len(x) == 1 and ITEM_KEY in x


def _deref(x: Any, store: SessionStore) -> Any:
    return expand(store.item(x[ITEM_KEY]), store) if _is_ref(x) else x


def expand(value: Any, store: SessionStore, fetched: dict[str, Any] | None = None) -> Any:
    """An item's JSON with its text references (see `DocumentBuilder._inner`) replaced by the texts
    (taken from `fetched` when it has them)."""
    if type(value) is not dict:
        return value

    def text(ref: dict[str, Any]) -> Any:
        h = ref[ITEM_KEY]
        return fetched[h] if fetched is not None and h in fetched else store.item(h)

    tag = value.get(TAG)
    if tag == "msg":
        v = value.get("v")
        if isinstance(v, dict) and _is_ref(v.get("content")):
            return {**value, "v": {**v, "content": text(v["content"])}}
        return value
    if tag is None and any(_is_ref(y) for y in value.values()):
        return {k: text(y) if _is_ref(y) else y for k, y in value.items()}
    return value


def text_refs(value: Any) -> list[str]:
    """The text items an item (a message or a plain object) references."""
    if type(value) is not dict:
        return []
    tag = value.get(TAG)
    if tag == "msg":
        v = value.get("v")
        return [v["content"][ITEM_KEY]] if isinstance(v, dict) and _is_ref(v.get("content")) else []
    if tag is None:
        return [y[ITEM_KEY] for y in value.values() if _is_ref(y)]
    return []


def _is_chunk(x: Any) -> bool:
    return isinstance(x, dict) and len(x) == 1 and CHUNK_KEY in x


def _unchunk(items: list[Any], store: SessionStore) -> list[Any]:
    flat: list[Any] = []
    for x in items:
        if _is_chunk(x):
            flat.extend(store.item(x[CHUNK_KEY]))
        else:
            flat.append(x)
    # One pass over each run file for all the element items (a long history has thousands).
    values = iter(store.items([x[ITEM_KEY] for x in flat if _is_ref(x)]))
    return [next(values) if _is_ref(x) else x for x in flat]


def metadata_json(enc: Any, item: Callable[[str], Any]) -> Any:
    """Stored metadata JSON with its shared string entries (`{"$m": hash}`) merged back in."""
    if isinstance(enc, dict) and META_KEY in enc and TAG not in enc:
        base = item(enc[META_KEY])
        return {**base, **{k: v for k, v in enc.items() if k != META_KEY}}
    return enc


def refs_of(rec: dict[str, Any]) -> list[str]:
    """The item hashes a checkpoint or writes record references."""
    tops: list[Any] = list((rec.get("values") or {}).values()) if rec["k"] == "c" else [w[2] for w in rec["writes"]]
    for hist in (rec.get(HISTORIES) or {}).values() if rec["k"] == "c" else ():
        tops.extend([hist["seed"]] if "seed" in hist else [])
        tops.extend(w[1] for w in hist.get("writes") or [])
    out: list[str] = []
    for key in ("metadata", "runtime_snapshot") if rec["k"] == "c" else ():
        shared = rec.get(key)
        if isinstance(shared, dict) and META_KEY in shared and TAG not in shared:
            out.append(shared[META_KEY])
    for enc in tops:
        if _is_ref(enc):
            out.append(enc[ITEM_KEY])
            continue
        inner = enc.get("v") if isinstance(enc, dict) and TAG in enc else enc
        parts = inner if isinstance(inner, list) else list(inner.values()) if isinstance(inner, dict) else []
        out.extend(x[ITEM_KEY] for x in parts if _is_ref(x))
        out.extend(x[CHUNK_KEY] for x in parts if _is_chunk(x))
    return out


def chunk_refs(value: Any) -> list[str]:
    """The item hashes a chunk item (a list of elements) references."""
    return [x[ITEM_KEY] for x in value if _is_ref(x)] if isinstance(value, list) else []


def stored_value(store: SessionStore, ns: str, doc: dict[str, Any], ch: str) -> Any:
    """The stored JSON of channel `ch` as checkpoint `doc` uses it."""
    _, home = doc["task_state"][ch]
    src = doc if home == doc["checkpoint_id"] else store.doc(ns, home)
    if src is None or ch not in src.get("values", {}):
        raise CorruptCheckpointError(
            str(store.runs_dir),
            0,
            f"checkpoint {doc['checkpoint_id']}: value of {ch!r} stored at {home} is missing",
        )
    return src["values"][ch]


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
