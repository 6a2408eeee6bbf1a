"""Stored values back to Python values: item references resolved (each run file read once per
value, or once per DeltaChannel history with `load_all`: `_prefetch`), then decoded by the codec; a
stored message is decoded once per session and every read gets its own copy (`fresh_message`);
another item's stored JSON is kept too, and decoded again for each read.

The inverse of `_saver_spill`.
"""

from __future__ import annotations

from typing import Any

import orjson
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from checkpointing._saver_refs import CHUNK_KEY, ITEM_KEY, _is_chunk, _is_ref, expand, resolve, text_refs
from checkpointing._saver_spill import MEMO
from checkpointing._saver_store import SessionStore
from checkpointing.codec import TAG, CheckpointStateCodec

_DECODED_BYTES = 8 * 1024 * 1024  # decoded messages kept per session, by content size


class ItemLoader:
    """Reads stored values back, decoding each stored message once per session."""

    def __init__(self, codec: CheckpointStateCodec) -> None:
        self.codec = codec

    def decode(self, enc: Any) -> Any:
        """Decode stored JSON (item references already resolved) into a fresh Python value."""
        return self.codec.decode(enc)

    def load(self, enc: Any, store: SessionStore, fetched: dict[str, Any] | None = None) -> Any:
        """`decode(resolve(enc))`, decoding each stored message of a list once per session: a
        message item (content-addressed, so never stale) is decoded on first read and every read
        gets its own copy (`fresh_message`). `fetched`: items already read (hash -> JSON), and
        where the ones read now are added."""
        if isinstance(enc, list):
            return self._load_list(enc, store, {} if fetched is None else fetched)
        if isinstance(enc, dict) and enc.get(TAG) == "delta_snapshot" and isinstance(enc.get("v"), list):
            return _DeltaSnapshot(self._load_list(enc["v"], store, {} if fetched is None else fetched))
        return self.decode(resolve(enc, store))

    def load_all(self, encs: list[Any], store: SessionStore) -> list[Any]:
        """`load` of each of `encs` (a DeltaChannel history: hundreds of one-message writes), the
        items of all of them read in one pass per run file, not one pass per value."""
        fetched: dict[str, Any] = {}
        _prefetch([x for enc in encs for x in _listed(enc)], store, fetched)
        return [self.load(enc, store, fetched) for enc in encs]

    def _load_list(self, items: list[Any], store: SessionStore, fetched: dict[str, Any]) -> list[Any]:
        chunks = [x[CHUNK_KEY] for x in items if _is_chunk(x)]
        chunk_refs = dict(zip(chunks, store.items(chunks), strict=True)) if chunks else {}
        flat: list[Any] = []
        for x in items:
            if _is_chunk(x):
                flat.extend(chunk_refs[x[CHUNK_KEY]])
            else:
                flat.append(x)
        _prefetch(flat, store, fetched)
        return [self._load_item(x, store, fetched) for x in flat]

    def _load_item(self, x: Any, store: SessionStore, fetched: dict[str, Any]) -> Any:
        if not _is_ref(x):
            return self.decode(x)
        h = x[ITEM_KEY]
        cache = store.decoded
        hit = cache.get(h)
        if hit is not None:
            cache.move_to_end(h)
            kept = hit[0]
            return fresh_message(kept) if isinstance(kept, BaseMessage) else self.decode(kept)
        raw = expand(fetched[h] if h in fetched else store.item(h), store, fetched)
        value = self.decode(raw)
        if isinstance(value, BaseMessage):
            kept, size = value, len(value.content) if isinstance(value.content, str) else 1024
        else:  # kept as stored (JSON, never changed by decoding): each read decodes its own copy
            kept, size = raw, len(orjson.dumps(raw))
        cache[h] = (kept, size)
        store.decoded_bytes += size
        while len(cache) > 1 and (len(cache) > MEMO or store.decoded_bytes > _DECODED_BYTES):
            _, (_, old) = cache.popitem(last=False)
            store.decoded_bytes -= old
        return fresh_message(value) if isinstance(value, BaseMessage) else value


def _listed(enc: Any) -> list[Any]:
    """The stored list `enc` is (a list, or a DeltaChannel snapshot of one); [] otherwise."""
    if isinstance(enc, list):
        return enc
    if isinstance(enc, dict) and enc.get(TAG) == "delta_snapshot" and isinstance(enc.get("v"), list):
        return enc["v"]
    return []


def fresh_message(msg: BaseMessage) -> BaseMessage:
    """A copy of a cached decoded message that shares nothing mutable with it: its list and dict
    fields (tool calls, kwargs, metadata, extra attributes) are copied too, so a caller may change
    what it got."""
    out = msg.model_copy()
    fields = out.__dict__
    for k, v in fields.items():
        if type(v) is dict:  # empty ones too: a caller may fill them
            fields[k] = _copy_json(v) if v else {}
        elif type(v) is list:
            fields[k] = _copy_json(v) if v else []
    extra = out.__pydantic_extra__
    if extra:
        for k, v in extra.items():
            if type(v) is dict or type(v) is list:
                extra[k] = _copy_json(v)
    return out


def _copy_json(v: Any) -> Any:
    if type(v) is dict:
        return {k: _copy_json(x) if type(x) is dict or type(x) is list else x for k, x in v.items()}
    return [_copy_json(x) if type(x) is dict or type(x) is list else x for x in v]


def _prefetch(flat: list[Any], store: SessionStore, got: dict[str, Any]) -> None:
    """Add to `got` the items (and the texts they reference) that decoding `flat` will read and
    that neither `got` nor the decoded cache holds, fetched in one pass per run file
    (`SessionStore.items`) instead of one open and seek per item."""
    decoded = store.decoded
    wanted = list(dict.fromkeys(h for x in flat if _is_ref(x) and (h := x[ITEM_KEY]) not in decoded and h not in got))
    if not wanted:
        return
    new = dict(zip(wanted, store.items(wanted), strict=True))
    texts = list(dict.fromkeys(t for v in new.values() for t in text_refs(v) if t not in got and t not in new))
    got.update(new)
    if texts:
        got.update(zip(texts, store.items(texts), strict=True))
