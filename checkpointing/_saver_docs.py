"""Checkpoint records (the document of DESIGN §4) and reading them back into LangGraph tuples.

A checkpoint record (`"k": "c"`) is one line holding the whole checkpoint:

    task_state       {channel: [version, home]}: the version of each stored channel it uses, and
                     the checkpoint whose record holds that value (itself when the channel is in
                     `new_versions`); values are stored once per (ns, channel, version)
    values           {channel: encoded value} for the channels whose home is this record
    channel_versions, versions_seen, updated_channels, pending_sends: as LangGraph gave them
    parent_writes    [[task_id, idx], ...]: the parent's pending writes this checkpoint was built
                     from; reading history checks each is stored (a lost one is an error)
    next_nodes, current_node, runtime_snapshot, metadata, created_at, tenant/session/run ids

A pending-writes record (`"k": "w"`) holds one `put_writes` call. JSON subtrees of values larger
than `inline_payload_max_bytes` go to the blob store (items of a list one by one, so the
snapshots of a growing list share their blobs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)

from checkpointing._saver_graphinfo import current_node, next_nodes
from checkpointing._saver_store import SCHEMA_VERSION, SessionStore, version_key
from checkpointing.blobs import BlobStore, is_blob_ref
from checkpointing.codec import TAG, CheckpointStateCodec
from checkpointing.errors import CorruptCheckpointError

_CONTAINER_TAGS = frozenset({"delta_snapshot", "tuple", "set", "frozenset", "overwrite", "deque"})


class DocumentBuilder:
    """Turns LangGraph checkpoints into records and back."""

    def __init__(self, codec: CheckpointStateCodec, blobs: BlobStore, inline_max: int) -> None:
        self.codec = codec
        self.blobs = blobs
        self.inline_max = inline_max

    def resolve_blob(self, ref: dict[str, Any]) -> Any:
        """The JSON a blob reference stands for (digest verified by the blob store)."""
        return orjson.loads(self.blobs.get(ref["$blob"]))

    def decode(self, enc: Any) -> Any:
        """Decode stored JSON into a fresh Python value."""
        return self.codec.decode(enc, self.resolve_blob)

    def spill(self, enc: Any, size: int | None = None) -> Any:
        """Move JSON subtrees larger than the inline limit to the blob store, deepest first."""
        if size is None:
            size = len(orjson.dumps(enc))
        if size <= self.inline_max:
            return enc
        if isinstance(enc, list):
            return [self.spill(x) for x in enc]
        if isinstance(enc, dict) and TAG not in enc and not is_blob_ref(enc):
            return {k: self.spill(v) for k, v in enc.items()}
        if isinstance(enc, dict) and enc.get(TAG) in _CONTAINER_TAGS:
            return {**enc, "v": self.spill(enc.get("v"))}
        data = orjson.dumps(enc)
        return self.blobs.ref_obj(data)

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
    ) -> dict[str, Any]:
        """The record of one `put`; raises (UnsupportedValueError) before any blob is written."""
        ns, cp_id = ids["ns"], checkpoint["id"]
        idx = store.index
        parent = idx.cps.get((ns, ids["parent_id"])) if ids["parent_id"] else None
        versions = checkpoint["channel_versions"]
        task_state: dict[str, list[Any]] = {}
        encoded: dict[str, Any] = {}
        for ch, value in checkpoint["channel_values"].items():
            ver = versions.get(ch)
            home = None
            if ch not in new_versions:
                home = _known_home(store, ns, ch, ver, parent)
            if home is None:
                encoded[ch] = self.codec.encode(value)
                home = cp_id
            task_state[ch] = [ver, home]
        meta_enc = self.codec.encode(metadata)
        sends = self.codec.encode(checkpoint["pending_sends"]) if "pending_sends" in checkpoint else None  # type: ignore[typeddict-item]
        values = {ch: self.spill(enc) for ch, enc in encoded.items()}
        parent_writes = (
            sorted([w.task, i] for w in idx.writes.get((ns, ids["parent_id"]), []) for i in w.idxs)
            if ids["parent_id"]
            else []
        )
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
            "runtime_snapshot": self.codec.encode(snapshot) if isinstance(snapshot, dict) else {},
            "metadata": meta_enc,
            "created_at": checkpoint["ts"],
            "checkpoint_format": checkpoint.get("v", 1),
        }
        if sends is not None:
            rec["pending_sends"] = sends
        return rec

    def writes_record(
        self, ids: dict[str, Any], writes: Sequence[tuple[str, Any]], task_id: str, task_path: str, skip: set[int]
    ) -> dict[str, Any] | None:
        """The record of one put_writes call, without ordinary writes already stored."""
        rows = []
        for i, (ch, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(ch, i)
            if idx >= 0 and idx in skip:
                continue
            rows.append([idx, ch, self.codec.encode(value)])
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
        _, home = doc["task_state"][ch]
        src = doc if home == doc["checkpoint_id"] else store.doc(ns, home)
        if src is None or ch not in src.get("values", {}):
            raise CorruptCheckpointError(
                str(store.runs_dir),
                0,
                f"checkpoint {doc['checkpoint_id']}: value of {ch!r} stored at {home} is missing",
            )
        return src["values"][ch]

    def pending_writes(
        self, store: SessionStore, ns: str, cp_id: str, only: set[str] | None = None
    ) -> list[PendingWrite]:
        """Pending writes of a checkpoint: first ordinary write per (task, idx), last special one."""
        merged: dict[tuple[str, int], tuple[str, str, Any, str]] = {}
        for rec in store.writes_records(ns, cp_id):
            task, path = rec["task_id"], rec.get("task_path", "")
            for idx, ch, enc in rec["writes"]:
                key = (task, idx)
                if idx >= 0 and key in merged:
                    continue
                merged[key] = (task, ch, enc, path)
        rows = sorted(merged.items(), key=lambda kv: writes_sort_key(kv[1][3], kv[0][0], kv[0][1]))
        return [(t, ch, self.decode(enc)) for (_, (t, ch, enc, _)) in rows if only is None or ch in only]

    def to_tuple(self, store: SessionStore, doc: dict[str, Any]) -> CheckpointTuple:
        """The LangGraph CheckpointTuple a stored record describes (fresh objects every call)."""
        ns, cp_id = doc["checkpoint_ns"], doc["checkpoint_id"]
        values = {ch: self.decode(self.value(store, ns, doc, ch)) for ch in doc["task_state"]}
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
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cp_id}},
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=self.decode(doc["metadata"]),
            parent_config=(
                {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": parent}}
                if parent
                else None
            ),
            pending_writes=self.pending_writes(store, ns, cp_id),
        )

    def document_view(self, store: SessionStore, doc: dict[str, Any]) -> dict[str, Any]:
        """The record as a plain document for recovery/doctor: values left out, metadata decoded."""
        out = {k: v for k, v in doc.items() if k not in ("values", "k")}
        out["metadata"] = self.decode(doc["metadata"])
        out["runtime_snapshot"] = self.decode(doc.get("runtime_snapshot") or {})
        return out


def _known_home(store: SessionStore, ns: str, ch: str, ver: Any, parent: Any) -> str | None:
    """The checkpoint already storing `ch` at version `ver`: the parent's, else any in the thread."""
    key = version_key(ver)
    if parent is not None and ch in parent.homes and version_key(parent.versions.get(ch)) == key:
        home: str = parent.homes[ch]
        return home
    return store.index.by_version.get((ns, ch, key))
