"""Checkpoint records (the document of DESIGN §4) and reading them back into LangGraph tuples.

A checkpoint record (`"k": "c"`) is one line holding the whole checkpoint:

    task_state       {channel: i}, `homes[i]` being the checkpoint whose record holds the value of
                     each stored channel it uses at its version in `channel_versions` (itself when
                     the channel is in `new_versions`); values are stored once per (ns, channel,
                     version). Read back (and in memory) as {channel: [version, home]}; schema
                     version 3 wrote {channel: home} and 2 those pairs, both still read
    homes            the distinct homes of `task_state`, each once
    values           {channel: encoded value} for the channels whose home is this record
    channel_versions, versions_seen, updated_channels, pending_sends: as LangGraph gave them
    parent_writes    [[task_id, idx, idx...], ...]: the parent's pending writes this checkpoint was built
                     from; reading history checks each is stored (a lost one is an error)
    delta_channels   the DeltaChannel channels (LangGraph's `counters_since_delta_snapshot`): one
                     without a value here is rebuilt from ancestors' writes (retention keeps them)
    next_nodes, current_node, runtime_snapshot, metadata, created_at, tenant/session/run ids

A pending-writes record (`"k": "w"`) holds one `put_writes` call.

Item records (`"k": "i", "h": <hash>, "v": <json>`): the items of a list value (and the values of
a dict value, and a whole write value) of at least `item_min_bytes` are stored once per session
under their content hash and referenced as `{"$i": <hash>}`. A message written as a pending write
and later part of a DeltaChannel snapshot (or a plain list channel) is therefore stored once. A
list of at least 2 x CHUNK elements is written as references to chunk items (CHUNK element
references each, cut from index 0, so a list that only grew shares all its full chunks with the
previous version) plus its tail: storage stays about linear even for a plain `add_messages` list.
Inside an item,
a message's content and the string values of a plain object of at least TEXT_MIN characters are
items of their own (schema 3), so a long text held by a message and by another channel's value
is stored once. Item records precede the records that reference them, in the
same write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointTuple,
    PendingWrite,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from checkpointing._saver_graphinfo import current_node, next_nodes
from checkpointing._saver_refs import (
    _CONTAINER_TAGS,
    CHUNK_KEY,
    ITEM_KEY,
    META_KEY,
    _is_chunk,
    _is_ref,
    expand,
    metadata_json,
    pending_writes_raw,
    resolve,
    stored_value,
    text_refs,
)
from checkpointing._saver_store import SCHEMA_VERSION, SessionStore, version_key
from checkpointing.codec import TAG, CheckpointStateCodec

CHUNK = 64
META_MIN = 256  # metadata strings at least this long together are one shared item
TEXT_MIN = 1024  # a text at least this long inside a stored item is an item of its own (stored once)
_MEMO = 20_000  # messages remembered per session (object -> its stored reference)
_DECODED_BYTES = 8 * 1024 * 1024  # decoded messages kept per session, by content size
Items = dict[str, bytes]


class DocumentBuilder:
    """Turns LangGraph checkpoints into records and back."""

    def __init__(self, codec: CheckpointStateCodec, item_min: int) -> None:
        self.codec = codec
        self.item_min = item_min

    def decode(self, enc: Any) -> Any:
        """Decode stored JSON (item references already resolved) into a fresh Python value."""
        return self.codec.decode(enc)

    def encode_spill(self, value: Any, store: SessionStore, new: Items) -> Any:
        """`spill(codec.encode(value))`, encoding and hashing each message of a list only once per
        session: a message object seen before (same object, still stored) reuses its reference."""
        items = value.value if isinstance(value, _DeltaSnapshot) else value
        if type(items) is not list:
            return self.spill(self.codec.encode(value), store, new)
        memo = store.memo
        refs = []
        for x in items:
            msg = isinstance(x, BaseMessage)
            # add_messages assigns ids in place: a memo entry holds only while no field was reassigned.
            shape = tuple(map(id, x.__dict__.values())) if msg else ()
            hit = memo.get(id(x)) if msg else None
            if (
                hit is not None
                and hit[0] is x
                and hit[2] == shape
                and (not _is_ref(hit[1]) or _known(hit[1], store, new))
            ):
                refs.append(hit[1])
                continue
            ref = self._item(self.codec.encode(x), store, new)
            if msg:
                memo[id(x)] = (x, ref, shape)
                if len(memo) > _MEMO:
                    memo.pop(next(iter(memo)))
            refs.append(ref)
        out = self._chunked(refs, store, new)
        return {TAG: "delta_snapshot", "v": out} if isinstance(value, _DeltaSnapshot) else out

    def spill(self, enc: Any, store: SessionStore, new: Items) -> Any:
        """`enc` with its big items (one level deep) replaced by item references; new ones in `new`."""
        if isinstance(enc, list):
            return self._chunked([self._item(x, store, new) for x in enc], store, new)
        if isinstance(enc, dict):
            if TAG not in enc:
                return {k: self._item(x, store, new) for k, x in enc.items()}
            if enc[TAG] in _CONTAINER_TAGS and isinstance(enc.get("v"), list):
                return {**enc, "v": self._chunked([self._item(x, store, new) for x in enc["v"]], store, new)}
        return self._item(enc, store, new)

    def _chunked(self, refs: list[Any], store: SessionStore, new: Items) -> list[Any]:
        """Full runs of CHUNK elements (from index 0) become one shared chunk item each, so a list
        that only grew writes a few chunk references plus its tail, not one reference per item."""
        if len(refs) < 2 * CHUNK:
            return refs
        full = len(refs) - len(refs) % CHUNK
        out: list[Any] = []
        for i in range(0, full, CHUNK):
            raw = orjson.dumps(refs[i : i + CHUNK])
            h = _stored(raw, store, new)
            out.append({CHUNK_KEY: h})
        return out + refs[full:]

    def _item(self, x: Any, store: SessionStore, new: Items) -> Any:
        if not isinstance(x, (dict, list, str)) or (isinstance(x, str) and len(x) < self.item_min):
            return x
        if type(x) is dict:
            x = self._inner(x, store, new)
        raw = orjson.dumps(x)
        if len(raw) < self.item_min:
            return x
        h = _stored(raw, store, new)
        return {ITEM_KEY: h}

    def load(self, enc: Any, store: SessionStore) -> Any:
        """`decode(resolve(enc))`, decoding each stored message of a list once per session: a
        message item (content-addressed, so never stale) is decoded on first read and every read
        gets its own copy (`fresh_message`)."""
        if isinstance(enc, list):
            return self._load_list(enc, store)
        if isinstance(enc, dict) and enc.get(TAG) == "delta_snapshot" and isinstance(enc.get("v"), list):
            return _DeltaSnapshot(self._load_list(enc["v"], store))
        return self.decode(self.resolve(enc, store))

    def _load_list(self, items: list[Any], store: SessionStore) -> list[Any]:
        chunks = [x[CHUNK_KEY] for x in items if _is_chunk(x)]
        chunk_refs = dict(zip(chunks, store.items(chunks), strict=True)) if chunks else {}
        flat: list[Any] = []
        for x in items:
            if _is_chunk(x):
                flat.extend(chunk_refs[x[CHUNK_KEY]])
            else:
                flat.append(x)
        fetched = _prefetch(flat, store)
        return [self._load_item(x, store, fetched) for x in flat]

    def _load_item(self, x: Any, store: SessionStore, fetched: dict[str, Any]) -> Any:
        if not _is_ref(x):
            return self.decode(x)
        h = x[ITEM_KEY]
        cache = store.decoded
        hit = cache.get(h)
        if hit is not None:
            cache.move_to_end(h)
            return fresh_message(hit[0])
        raw = fetched[h] if h in fetched else store.item(h)
        value = self.decode(expand(raw, store, fetched))
        if not isinstance(value, BaseMessage):
            return value
        size = len(value.content) if isinstance(value.content, str) else 1024
        cache[h] = (value, size)
        store.decoded_bytes += size
        while len(cache) > 1 and (len(cache) > _MEMO or store.decoded_bytes > _DECODED_BYTES):
            _, (_, old) = cache.popitem(last=False)
            store.decoded_bytes -= old
        return fresh_message(value)

    def _inner(self, x: dict[str, Any], store: SessionStore, new: Items) -> dict[str, Any]:
        """`x` with its long texts stored as items of their own: a message's string content, and
        the string values of a plain object (e.g. a tool-result record). The same text in a tool
        message and in another record is then stored once."""
        tag = x.get(TAG)
        if tag == "msg":
            v = x.get("v")
            if isinstance(v, dict) and type(c := v.get("content")) is str and len(c) >= TEXT_MIN:
                return {**x, "v": {**v, "content": self._text(c, store, new)}}
            return x
        if tag is None and any(type(y) is str and len(y) >= TEXT_MIN for y in x.values()):
            return {k: self._text(y, store, new) if type(y) is str and len(y) >= TEXT_MIN else y for k, y in x.items()}
        return x

    def text_ref(self, text: str, store: SessionStore, new: Items) -> dict[str, str]:
        """The item reference of a long text, the same one `_inner` gives it inside a message."""
        return self._text(text, store, new)

    @staticmethod
    def text_hash(text: str) -> str:
        """The content hash a text is stored under as an item."""
        return hashlib.blake2b(orjson.dumps(text), digest_size=16).hexdigest()

    def _text(self, text: str, store: SessionStore, new: Items) -> dict[str, str]:
        raw = orjson.dumps(text)
        h = _stored(raw, store, new)
        return {ITEM_KEY: h}

    def _meta(self, enc: Any, store: SessionStore, new: Items) -> Any:
        """Encoded metadata with its string entries (the pins a caller copies into every checkpoint:
        digests, ids) stored as one shared item `{"$m": hash}` when they are long enough."""
        if type(enc) is not dict or TAG in enc:
            return enc
        strs = {k: v for k, v in enc.items() if type(v) is str}
        raw = orjson.dumps(strs)
        if len(raw) < META_MIN:
            return enc
        h = _stored(raw, store, new)
        return {META_KEY: h, **{k: v for k, v in enc.items() if type(v) is not str}}

    def _shared(self, enc: Any, store: SessionStore, new: Items) -> Any:
        """An encoded plain dict stored whole as one shared item `{"$m": hash}` when it is long
        enough (a runtime snapshot repeats from checkpoint to checkpoint: stored once)."""
        if type(enc) is not dict or TAG in enc:
            return enc
        raw = orjson.dumps(enc)
        if len(raw) < META_MIN:
            return enc
        h = _stored(raw, store, new)
        return {META_KEY: h}

    def runtime_snapshot(self, doc: dict[str, Any], store: SessionStore) -> Any:
        """The decoded runtime snapshot of a checkpoint record."""
        return self.decode(metadata_json(doc.get("runtime_snapshot") or {}, store.item))

    def metadata(self, doc: dict[str, Any], store: SessionStore) -> Any:
        """The decoded metadata of a checkpoint record."""
        return self.decode(metadata_json(doc.get("metadata"), store.item))

    def resolve(self, enc: Any, store: SessionStore) -> Any:
        """The inverse of `spill`: item references replaced by the JSON they stand for."""
        return resolve(enc, store)

    # -- writing -------------------------------------------------------------------------------

    def checkpoint_record(
        self,
        ids: dict[str, Any],
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: dict[str, Any],
        new_versions: Mapping[str, Any],
        store: SessionStore,
        parent_seen: Mapping[str, Any] | None,
        new: Items,
        snapshot: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The record of one `put` (its new items added to `new`); raises before anything is written."""
        ns, cp_id = ids["ns"], checkpoint["id"]
        idx = store.index
        parent_key = (ns, ids["parent_id"])
        parent = store.detail(parent_key) if ids["parent_id"] and parent_key in idx.cps else None
        versions = checkpoint["channel_versions"]
        task_state: dict[str, list[Any]] = {}
        encoded: dict[str, Any] = {}
        for ch, value in checkpoint["channel_values"].items():
            ver = versions.get(ch)
            home = None
            if ch not in new_versions:
                home = _known_home(store, ns, ch, ver, parent)
                # A run references values of its own run only (stored again once, in its first
                # record, when unchanged since another run): retention of one run then never
                # changes another's records (see `_saver_retention.affected`).
                if home is not None and (loc := idx.cps.get((ns, home))) is not None and loc.run != ids["run"]:
                    home = None
            if home is None:
                encoded[ch] = self.encode_spill(value, store, new)
                home = cp_id
            task_state[ch] = [ver, home]
        meta_enc = self._meta(self.codec.encode(metadata), store, new)
        sends = self.codec.encode(checkpoint["pending_sends"]) if "pending_sends" in checkpoint else None  # type: ignore[typeddict-item]
        values = encoded
        parent_writes = (
            sorted([w.task, i] for w in idx.writes.get((ns, ids["parent_id"]), []) for i in w.idxs)
            if ids["parent_id"]
            else []
        )
        counters = metadata.get("counters_since_delta_snapshot")
        delta_channels = sorted(counters) if isinstance(counters, dict) else []
        if snapshot is None:
            snapshot = metadata.get("runtime_snapshot")
        run_meta = metadata.get("run_id")
        rec: dict[str, Any] = {
            "k": "c",
            "schema_version": SCHEMA_VERSION,
            "checkpoint_id": cp_id,
            "parent_checkpoint_id": ids["parent_id"],
            "checkpoint_ns": ns,
            "tenant_id": ids["tenant"],
            "session_id": ids["thread"],
            "run_id": ids["run"],
            "run_id_meta": run_meta if isinstance(run_meta, str) else None,
            "current_node": current_node(checkpoint["versions_seen"], parent_seen),
            "next_nodes": next_nodes(checkpoint),
            "task_state": task_state,
            "values": values,
            "channel_versions": dict(versions),
            "versions_seen": {k: dict(v) for k, v in checkpoint["versions_seen"].items()},
            "updated_channels": checkpoint.get("updated_channels"),
            "parent_writes": parent_writes,
            "delta_channels": delta_channels,
            "runtime_snapshot": self._shared(self.codec.encode(dict(snapshot)), store, new)
            if isinstance(snapshot, Mapping)
            else {},
            "metadata": meta_enc,
            "created_at": checkpoint["ts"],
            "checkpoint_format": checkpoint.get("v", 1),
        }
        if sends is not None:
            rec["pending_sends"] = sends
        return rec

    def writes_record(
        self,
        ids: dict[str, Any],
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        skip: set[int],
        store: SessionStore,
        new: Items,
    ) -> dict[str, Any] | None:
        """The record of one put_writes call, without ordinary writes already stored."""
        rows = []
        for i, (ch, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(ch, i)
            if idx >= 0 and idx in skip:
                continue
            rows.append([idx, ch, self.encode_spill(value, store, new)])
        if not rows:
            return None
        return {
            "k": "w",
            "schema_version": SCHEMA_VERSION,
            "checkpoint_id": ids["cp_id"],
            "checkpoint_ns": ids["ns"],
            "task_id": task_id,
            "task_path": task_path,
            "writes": rows,
        }

    # -- reading -------------------------------------------------------------------------------

    def value(self, store: SessionStore, ns: str, doc: dict[str, Any], ch: str) -> Any:
        """The stored JSON of channel `ch` as checkpoint `doc` uses it."""
        return stored_value(store, ns, doc, ch)

    def pending_writes(
        self, store: SessionStore, ns: str, cp_id: str, only: set[str] | None = None
    ) -> list[PendingWrite]:
        """Pending writes of a checkpoint: first ordinary write per (task, idx), last special one."""
        return [(t, ch, self.load(enc, store)) for t, ch, enc in self.pending_writes_raw(store, ns, cp_id, only)]

    def pending_writes_raw(
        self, store: SessionStore, ns: str, cp_id: str, only: set[str] | None = None
    ) -> list[tuple[str, str, Any]]:
        """`pending_writes` with each value as stored (encoded, item references unresolved)."""
        return pending_writes_raw(store, ns, cp_id, only)

    def to_tuple(self, store: SessionStore, doc: dict[str, Any], tenant: str | None = None) -> CheckpointTuple:
        """The LangGraph CheckpointTuple a stored record describes (fresh objects every call).

        `tenant` (when not the saver's default) is part of the configs it returns, so LangGraph's
        follow-up reads (parent walk, DeltaChannel history) stay in the caller's tenant.
        """
        ns, cp_id = doc["checkpoint_ns"], doc["checkpoint_id"]
        values = {ch: self.load(self.value(store, ns, doc, ch), store) for ch in doc["task_state"]}
        checkpoint: dict[str, Any] = {
            "v": doc.get("checkpoint_format", 1),
            "id": cp_id,
            "ts": doc["created_at"],
            "channel_values": values,
            "channel_versions": dict(doc["channel_versions"]),
            "versions_seen": {k: dict(v) for k, v in doc["versions_seen"].items()},
            "updated_channels": doc.get("updated_channels"),
        }
        if "pending_sends" in doc:
            checkpoint["pending_sends"] = self.decode(doc["pending_sends"])
        thread = doc["session_id"]
        parent = doc.get("parent_checkpoint_id")
        extra = {"tenant_id": tenant} if tenant else {}
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cp_id, **extra}},
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=self.metadata(doc, store),
            parent_config=(
                {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": parent, **extra}}
                if parent
                else None
            ),
            pending_writes=self.pending_writes(store, ns, cp_id),
        )

    def document_view(self, store: SessionStore, doc: dict[str, Any]) -> dict[str, Any]:
        """The record as a plain document for a caller's checks or an inspector: values left out,
        metadata decoded."""
        out = {k: v for k, v in doc.items() if k not in ("values", "k")}
        out["metadata"] = self.metadata(doc, store)
        out["runtime_snapshot"] = self.runtime_snapshot(doc, store)
        return out


def _stored(raw: bytes, store: SessionStore, new: Items) -> str:
    """The content hash of item JSON `raw`, added to `new` unless the session already stores it."""
    h = hashlib.blake2b(raw, digest_size=16).hexdigest()
    if h not in new and h not in store.index.items:
        new[h] = raw
    return h


def fresh_message(msg: BaseMessage) -> BaseMessage:
    """A copy of a cached decoded message that shares nothing mutable with it: its list and dict
    fields (tool calls, kwargs, metadata, extra attributes) are copied too, so a caller may change
    what it got."""
    out = msg.model_copy()
    for fields in (out.__dict__, out.__pydantic_extra__ or {}):
        for k, v in fields.items():
            if v and (type(v) is dict or type(v) is list):
                fields[k] = _copy_json(v)
    return out


def _copy_json(v: Any) -> Any:
    t = type(v)
    if t is dict:
        return {k: _copy_json(x) for k, x in v.items()}
    if t is list:
        return [_copy_json(x) for x in v]
    return v


def _prefetch(flat: list[Any], store: SessionStore) -> dict[str, Any]:
    """The items (and the texts they reference) that decoding `flat` will read, fetched in one pass
    per run file (`SessionStore.items`) instead of one open and seek per item."""
    wanted = list(dict.fromkeys(x[ITEM_KEY] for x in flat if _is_ref(x) and x[ITEM_KEY] not in store.decoded))
    if not wanted:
        return {}
    got = dict(zip(wanted, store.items(wanted), strict=True))
    texts = list(dict.fromkeys(t for v in got.values() for t in text_refs(v) if t not in got))
    if texts:
        got.update(zip(texts, store.items(texts), strict=True))
    return got


def _known(ref: dict[str, Any], store: SessionStore, new: Items) -> bool:
    h = ref[ITEM_KEY]
    return h in new or h in store.index.items


def _known_home(store: SessionStore, ns: str, ch: str, ver: Any, parent: Any) -> str | None:
    """The checkpoint already storing `ch` at version `ver`: the parent's, else any in the thread."""
    key = version_key(ver)
    homes, versions = (parent.homes, parent.versions) if parent is not None else (None, None)
    if homes is not None and versions is not None and ch in homes and version_key(versions.get(ch)) == key:
        home: str = homes[ch]
        return home
    return store.home_of(ns, ch, key)
