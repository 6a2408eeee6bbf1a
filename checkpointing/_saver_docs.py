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

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointTuple,
    PendingWrite,
)

from checkpointing._saver_format import SCHEMA_VERSION
from checkpointing._saver_graphinfo import current_node, next_nodes
from checkpointing._saver_index import version_key
from checkpointing._saver_load import ItemLoader
from checkpointing._saver_refs import metadata_json, pending_writes_raw, resolve, stored_value
from checkpointing._saver_spill import Items, ItemSpiller
from checkpointing._saver_store import SessionStore
from checkpointing.codec import CheckpointStateCodec


class DocumentBuilder:
    """Turns LangGraph checkpoints into records and back."""

    def __init__(self, codec: CheckpointStateCodec, item_min: int) -> None:
        self.codec = codec
        self.item_min = item_min
        self.spiller = ItemSpiller(codec, item_min)
        self.loader = ItemLoader(codec)

    def encode_spill(self, value: Any, store: SessionStore, new: Items, key: Hashable | None = None) -> Any:
        """`value` encoded, its big parts stored as items (`_saver_spill.ItemSpiller.encode_spill`;
        `key`: the channel whose value it is, `(checkpoint_ns, channel)`)."""
        return self.spiller.encode_spill(value, store, new, key)

    def load(self, enc: Any, store: SessionStore) -> Any:
        """A stored value read back (`_saver_load.ItemLoader.load`)."""
        return self.loader.load(enc, store)

    def load_all(self, encs: list[Any], store: SessionStore) -> list[Any]:
        """Stored values read back, their items in one pass (`_saver_load.ItemLoader.load_all`)."""
        return self.loader.load_all(encs, store)

    def text_ref(self, text: str, store: SessionStore, new: Items) -> dict[str, str]:
        """The item reference of a long text (`ItemSpiller.text_ref`)."""
        return self.spiller.text_ref(text, store, new)

    @staticmethod
    def text_hash(text: str) -> str:
        """The content hash a text is stored under as an item."""
        return ItemSpiller.text_hash(text)

    def decode(self, enc: Any) -> Any:
        """Decode stored JSON (item references already resolved) into a fresh Python value."""
        return self.codec.decode(enc)

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
                encoded[ch] = self.encode_spill(value, store, new, (ns, ch))
                home = cp_id
            task_state[ch] = [ver, home]
        meta_enc = self.spiller.meta(self.codec.encode(metadata), store, new)
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
            "runtime_snapshot": self.spiller.shared(self.codec.encode(dict(snapshot)), store, new)
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


def _known_home(store: SessionStore, ns: str, ch: str, ver: Any, parent: Any) -> str | None:
    """The checkpoint already storing `ch` at version `ver`: the parent's, else any in the thread."""
    key = version_key(ver)
    homes, versions = (parent.homes, parent.versions) if parent is not None else (None, None)
    if homes is not None and versions is not None and ch in homes and version_key(versions.get(ch)) == key:
        home: str = homes[ch]
        return home
    return store.home_of(ns, ch, key)
