"""Channel values inside checkpoint documents: by reference, as deltas, or whole.

`task_state` maps each channel to one entry:

    {"ref": <checkpoint_id>}                unchanged: the value is the one stored at that document
    {"w": <json>}                           written whole (a keyframe for append-only channels)
    {"d": <checkpoint_id>, "add": [...],    append-only: the value at document `d` plus `add`;
     "n": k, "kb": bytes, "db": bytes,      k deltas since the keyframe of `kb` bytes, `db` delta bytes;
     "pw": [<checkpoint_id>, ...]}          items `{"$pw": [cp, task, idx, j], "id": ..}` are a
                                            pending write of checkpoint cp (its j-th element,
                                            message id re-applied), not a second copy

A LangGraph `_DeltaSnapshot` of a list is handled like the list it wraps.

A list that only grew is written as a delta. A full keyframe is written once at least
`keyframe_every` deltas follow the last one AND the items they add reach twice the keyframe's
size, so keyframes are spaced geometrically: storage stays linear in the session (a fixed
every-K keyframe would make it quadratic again) and reading a value costs at most about three
times its size. Anything that is not a pure append is written whole. JSON subtrees larger than
`inline_payload_max_bytes` go to the blob store (`spill`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.types import _DeltaSnapshot

from checkpointing.blobs import BlobStore, is_blob_ref
from checkpointing.codec import TAG
from checkpointing.errors import CorruptCheckpointError
from checkpointing.records import canonical_json

_UNSET: Any = object()
PW_KEY = "$pw"
DL_KEY = "$dl"
SNAPSHOT_TAG = "delta_snapshot"
# Tagged values whose payload the codec decodes item by item (so blob references inside resolve).
_CONTAINER_TAGS = frozenset({SNAPSHOT_TAG, "tuple", "set", "frozenset", "dict", "overwrite"})
_VALUE_CACHE_ENTRIES = 512


@dataclass
class ChanState:
    """What the saver knows about one channel at one checkpoint."""

    version: Any
    home: str
    n: int = 0
    kb: int = 0
    db: int = 0
    enc: Any = _UNSET
    obj: Any = _UNSET


@dataclass
class HeadState:
    """The last checkpoint put for a (tenant, thread, ns): lets the next put skip disk reads."""

    cp_id: str
    versions_seen: dict[str, Any]
    chans: dict[str, ChanState] = field(default_factory=dict)


def size_of(enc: Any) -> int:
    """Bytes of the canonical JSON of `enc`."""
    return len(canonical_json(enc))


def spill(enc: Any, blobs: BlobStore, limit: int, size: int | None = None) -> Any:
    """Move JSON subtrees larger than `limit` bytes to the blob store, deepest container first."""
    if size is None:
        size = size_of(enc)
    if size <= limit:
        return enc
    if isinstance(enc, list):
        return [spill(x, blobs, limit) for x in enc]
    if isinstance(enc, dict) and TAG not in enc and not is_blob_ref(enc):
        return {k: spill(v, blobs, limit) for k, v in enc.items()}
    if isinstance(enc, dict) and enc.get(TAG) == "msg" and isinstance(enc.get("v"), dict):
        # Spill inside the message, so its id stays visible and equal contents share one blob.
        return {TAG: "msg", "v": {k: spill(v, blobs, limit) for k, v in enc["v"].items()}}
    if isinstance(enc, dict) and enc.get(TAG) in _CONTAINER_TAGS:
        return {**enc, "v": spill(enc.get("v"), blobs, limit)}
    return blobs.ref_obj(canonical_json(enc))


class ValueReader:
    """Rebuilds the JSON value of a channel at a document by following refs and deltas."""

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    def remember(self, key: tuple[Any, ...], enc: Any) -> None:
        """Cache the full JSON value of a channel at its home document."""
        self._cache[key] = enc
        self._cache.move_to_end(key)
        while len(self._cache) > _VALUE_CACHE_ENTRIES:
            self._cache.popitem(last=False)

    def clear(self) -> None:
        """Forget every cached value (after a rewrite or delete)."""
        self._cache.clear()

    def home_entry(self, store: Any, ns: str, cp_id: str, channel: str) -> tuple[str, dict[str, Any]]:
        """(home document id, its entry) for `channel` at document `cp_id`."""
        cur = cp_id
        for _ in range(2):
            doc = _doc(store, ns, cur, cp_id)
            entry = doc["task_state"].get(channel)
            if entry is None:
                raise _broken(store, cp_id, f"channel {channel!r} missing from checkpoint {cur}")
            if "ref" not in entry:
                return cur, entry
            cur = entry["ref"]
        raise _broken(store, cp_id, f"channel {channel!r}: reference to a reference at {cur}")

    def value(self, skey: tuple[str, str], store: Any, ns: str, cp_id: str, channel: str) -> Any:
        """The full JSON value of `channel` at document `cp_id`."""
        chain: list[list[Any]] = []
        home, entry = self.home_entry(store, ns, cp_id, channel)
        cur = home
        while True:
            key = (*skey, ns, cur, channel)
            hit = self._cache.get(key, _UNSET)
            if hit is not _UNSET:
                base = hit
                break
            if cur != home:
                _, entry = self.home_entry(store, ns, cur, channel)
            if "w" in entry:
                base = entry["w"]
                break
            if "d" not in entry:
                raise _broken(store, cp_id, f"channel {channel!r}: unknown entry at checkpoint {cur}")
            chain.append(entry["add"])
            cur = entry["d"]
        if chain:
            added = [x for add in reversed(chain) for x in _resolve_pw(store, ns, add, cp_id)]
            if isinstance(base, list):
                base = base + added
            elif isinstance(base, dict) and base.get(TAG) == SNAPSHOT_TAG and isinstance(base.get("v"), list):
                base = {TAG: SNAPSHOT_TAG, "v": base["v"] + added}
            else:
                raise _broken(store, cp_id, f"channel {channel!r}: delta over a non-list value")
        self.remember((*skey, ns, home, channel), base)
        return base


def strip_id(enc: Any) -> tuple[bytes, Any]:
    """(digest of a message item without its id, the id): how writes and deltas are matched."""
    if isinstance(enc, dict) and enc.get(TAG) == "msg" and isinstance(enc.get("v"), dict):
        body = {k: v for k, v in enc["v"].items() if k != "id"}
        raw, msg_id = canonical_json({TAG: "msg", "v": body}), enc["v"].get("id")
    else:
        raw, msg_id = canonical_json(enc), None
    return hashlib.blake2b(raw, digest_size=20).digest(), msg_id


def with_id(item: Any, msg_id: Any) -> Any:
    """A message item with its id set to `msg_id` (removed when None); other items unchanged."""
    if not (isinstance(item, dict) and item.get(TAG) == "msg" and isinstance(item.get("v"), dict)):
        return item
    body = {k: v for k, v in item["v"].items() if k != "id"}
    if msg_id is not None:
        body["id"] = msg_id
    return {TAG: "msg", "v": body}


def _resolve_pw(store: Any, ns: str, items: list[Any], origin: str) -> list[Any]:
    """Replace `{"$pw": [cp, task, idx, j], "id": ...}` items by the pending write they point at."""
    wanted = {x[PW_KEY][0] for x in items if isinstance(x, dict) and PW_KEY in x}
    if not wanted:
        return items
    rows: dict[tuple[str, str, int], Any] = {}
    for cp in wanted:
        for rec in store.writes_records(ns, cp):
            for idx, _ch, enc in rec["writes"]:
                rows.setdefault((cp, rec["task_id"], idx), enc)
    out = []
    for x in items:
        if not (isinstance(x, dict) and PW_KEY in x):
            out.append(x)
            continue
        cp, task, idx, j = x[PW_KEY]
        if (cp, task, idx) not in rows:
            raise _broken(store, origin, f"pending write {task}/{idx} of checkpoint {cp} is not stored")
        val = rows[(cp, task, idx)]
        out.append(with_id(val[j] if j >= 0 else val, x.get("id")))
    return out


def _doc(store: Any, ns: str, cp_id: str, origin: str) -> dict[str, Any]:
    doc = store.doc(ns, cp_id)
    if doc is None:
        raise _broken(store, origin, f"it depends on checkpoint {cp_id}, which is not stored")
    return doc


def _broken(store: Any, cp_id: str, reason: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(str(store.runs_dir), 0, f"checkpoint {cp_id}: {reason}")


def _is_dl(e: Any) -> bool:
    return isinstance(e, dict) and DL_KEY in e and TAG not in e


def _list_of(value: Any) -> list[Any] | None:
    """The items of a list value or of a DeltaChannel snapshot of a list; None otherwise."""
    if isinstance(value, list):
        return value
    if isinstance(value, _DeltaSnapshot) and isinstance(value.value, list):
        return value.value
    return None


def _copy_value(value: Any) -> Any:
    """A shallow copy kept for the next append check (the caller may keep mutating its list)."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, _DeltaSnapshot) and isinstance(value.value, list):
        return _DeltaSnapshot(list(value.value))
    return _UNSET


def _extend(base: Any, items: list[Any]) -> Any:
    """JSON value `base` (a list, or a tagged snapshot of one) with `items` appended."""
    if isinstance(base, dict) and base.get(TAG) == SNAPSHOT_TAG:
        return {TAG: SNAPSHOT_TAG, "v": base["v"] + items}
    return base + items
