"""Values to their stored form: the items of a list value (and the values of a dict value, and a
whole write value) of at least `item_min` bytes, long texts and long metadata are stored once per
session under their content hash and referenced (`{"$i": hash}`, `{"$c": hash}` for a chunk of
CHUNK references, `{"$m": hash}` for shared metadata); the new ones are collected in `new`
(hash -> JSON) for the caller to append before the record that references them.

`_saver_load` reads them back; `_saver_docs` describes the record layout.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from itertools import islice
from operator import is_
from typing import Any

import orjson
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from checkpointing._saver_prefix import remember, reusable, taken
from checkpointing._saver_refs import _CONTAINER_TAGS, CHUNK_KEY, ITEM_KEY, META_KEY, _is_ref
from checkpointing._saver_store import SessionStore
from checkpointing.codec import TAG, CheckpointStateCodec

CHUNK = 64
META_MIN = 256  # metadata strings at least this long together are one shared item
TEXT_MIN = 1024  # a text at least this long inside a stored item is an item of its own (stored once)
MEMO = 20_000  # messages remembered per session (object -> its stored reference)
CHUNK_MEMO = 1024  # chunks remembered per session (their references -> the chunk's hash)
Items = dict[str, bytes]


class ItemSpiller:
    """Encodes values and stores their big parts as content-addressed items of the session."""

    def __init__(self, codec: CheckpointStateCodec, item_min: int) -> None:
        self.codec = codec
        self.item_min = item_min

    def encode_spill(self, value: Any, store: SessionStore, new: Items, key: Hashable | None = None) -> Any:
        """`spill(codec.encode(value))`, encoding and hashing each message of a list only once per
        session: a message object seen before (same object, still stored) reuses its reference.
        With `key` (a channel's `(checkpoint_ns, channel)`), a list that begins with the messages the
        channel's last one began with, unchanged, reuses their references and chunks after one pass
        of C code over them (`_saver_prefix`), not a Python step per message."""
        items = value.value if isinstance(value, _DeltaSnapshot) else value
        if type(items) is not list:
            return self.spill(self.codec.encode(value), store, new)
        known = store.index.items
        reused = reusable(store.lists, key, items, known) if key is not None else None
        refs: list[Any] = reused.refs[:] if reused is not None else []
        start = len(refs)
        fields_before = taken(items, start) if key is not None else None
        memo = store.memo
        add = refs.append
        # A memo hit costs a dict lookup and the identity of the message's fields, nothing more.
        for x in islice(items, start, None):
            if not isinstance(x, BaseMessage):
                add(self._item(self.codec.encode(x), store, new))
                continue
            # add_messages assigns ids in place: a memo entry holds only while no field was reassigned
            # (the same objects in every field; compared by identity, without building anything).
            fields = x.__dict__
            hit = memo.get(id(x))
            if (
                hit is not None
                and hit[0] is x
                and len(hit[2]) == len(fields)
                and all(map(is_, fields.values(), hit[2]))
                and (hit[3] is None or hit[3] in known or hit[3] in new)
            ):
                add(hit[1])
                continue
            # The fields as they were before encoding (see `_saver_prefix.taken`).
            before = tuple(fields.values())
            ref = self._item(self.codec.encode(x), store, new)
            memo[id(x)] = (x, ref, before, ref[ITEM_KEY] if _is_ref(ref) else None)
            if len(memo) > MEMO:
                memo.pop(next(iter(memo)))
            add(ref)
        done = reused.chunks[: start // CHUNK] if reused is not None else []
        out, chunks, fresh = self._chunked(refs, store, new, done)
        if key is not None:
            pending = [r[ITEM_KEY] for r in islice(refs, start, None) if _is_ref(r)] + fresh
            assert fields_before is not None
            remember(store.lists, key, fields_before, refs, chunks, reused, known, pending)
        return {TAG: "delta_snapshot", "v": out} if isinstance(value, _DeltaSnapshot) else out

    def spill(self, enc: Any, store: SessionStore, new: Items) -> Any:
        """`enc` with its big items (one level deep) replaced by item references; new ones in `new`."""
        if isinstance(enc, list):
            return self._chunked([self._item(x, store, new) for x in enc], store, new)[0]
        if isinstance(enc, dict):
            if TAG not in enc:
                return {k: self._item(x, store, new) for k, x in enc.items()}
            if enc[TAG] in _CONTAINER_TAGS and isinstance(enc.get("v"), list):
                return {**enc, "v": self._chunked([self._item(x, store, new) for x in enc["v"]], store, new)[0]}
        return self._item(enc, store, new)

    def _chunked(
        self, refs: list[Any], store: SessionStore, new: Items, done: list[Any] | None = None
    ) -> tuple[list[Any], list[Any], list[str]]:
        """Full runs of CHUNK elements (from index 0) become one shared chunk item each, so a list
        that only grew writes a few chunk references plus its tail, not one reference per item.

        `done`: the chunk references of the first full chunks of `refs`, known to be those (the
        same references as in the list they were made for). Returns the stored form, its chunk
        references, and the hashes of the chunks made here."""
        if len(refs) < 2 * CHUNK:
            return refs, [], []
        full = len(refs) - len(refs) % CHUNK
        out: list[Any] = list(done or ())
        fresh: list[str] = []
        memo, known = store.chunk_memo, store.index.items
        for i in range(len(out) * CHUNK, full, CHUNK):
            part = refs[i : i + CHUNK]
            # The memo's references are the same objects put after put (never changed once made):
            # a chunk of the very same ones is the same JSON, already hashed (and stored, if known).
            hit = memo.get(id(part[0]))
            if hit is not None and all(map(is_, part, hit[0])) and (hit[1] in known or hit[1] in new):
                out.append({CHUNK_KEY: hit[1]})
                fresh.append(hit[1])
                continue
            h = _stored(orjson.dumps(part), store, new)
            memo[id(part[0])] = (tuple(part), h)
            if len(memo) > CHUNK_MEMO:
                memo.pop(next(iter(memo)))
            out.append({CHUNK_KEY: h})
            fresh.append(h)
        return out + refs[full:], out, fresh

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

    def meta(self, enc: Any, store: SessionStore, new: Items) -> Any:
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

    def shared(self, enc: Any, store: SessionStore, new: Items) -> Any:
        """An encoded plain dict stored whole as one shared item `{"$m": hash}` when it is long
        enough (a runtime snapshot repeats from checkpoint to checkpoint: stored once)."""
        if type(enc) is not dict or TAG in enc:
            return enc
        raw = orjson.dumps(enc)
        if len(raw) < META_MIN:
            return enc
        h = _stored(raw, store, new)
        return {META_KEY: h}


def _stored(raw: bytes, store: SessionStore, new: Items) -> str:
    """The content hash of item JSON `raw`, added to `new` unless the session already stores it."""
    h = hashlib.blake2b(raw, digest_size=16).hexdigest()
    if h not in new and h not in store.index.items:
        new[h] = raw
    return h
