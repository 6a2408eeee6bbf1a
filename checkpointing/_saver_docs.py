"""Building checkpoint documents (DESIGN §4) and reading them back into LangGraph tuples."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)

from checkpointing._saver_graphinfo import current_node, next_nodes
from checkpointing._saver_state import (
    _UNSET,
    DL_KEY,
    PW_KEY,
    ChanState,
    HeadState,
    ValueReader,
    _copy_value,
    _extend,
    _is_dl,
    _list_of,
    size_of,
    spill,
    strip_id,
    with_id,
)
from checkpointing._saver_store import SessionStore
from checkpointing.blobs import BlobStore
from checkpointing.codec import CheckpointStateCodec
from checkpointing.digest import config_digest
from checkpointing.errors import CorruptCheckpointError
from checkpointing.validation import SCHEMA_VERSION

_RECENT_ITEMS = 4096
# A keyframe once the deltas since the last one add up to this many times its size: keyframes
# grow geometrically, so their total stays under 1.5x the value and a read costs <= 3x its size.
KEYFRAME_GROWTH = 2
SNAPSHOT_KEYS = ("surface_digest", "toolset_hash", "active_skill", "todo")


class DocumentBuilder:
    """Turns LangGraph checkpoints into documents and back, sharing caches with the saver."""

    def __init__(
        self,
        codec: CheckpointStateCodec,
        blobs: BlobStore,
        inline_max: int,
        keyframe_every: int,
        digest_keys: Sequence[str],
    ) -> None:
        self.codec = codec
        self.blobs = blobs
        self.inline_max = inline_max
        self.keyframe_every = keyframe_every
        self.digest_keys = tuple(digest_keys)
        self.values = ValueReader()
        # Pending writes of recent checkpoints, by content: lets a delta point at them, not copy them.
        self._recent: OrderedDict[tuple[Any, ...], OrderedDict[bytes, list[Any]]] = OrderedDict()
        # ...and delta items of recent checkpoints, for pending writes that arrive after them.
        self._recent_deltas: OrderedDict[tuple[Any, ...], OrderedDict[bytes, list[Any]]] = OrderedDict()
        self._notes: list[tuple[bytes, list[Any]]] = []

    def resolve_blob(self, ref: dict[str, Any]) -> Any:
        """Load the JSON a blob reference stands for (digest verified by the blob store)."""
        import json

        return json.loads(self.blobs.get(ref["$blob"]))

    def decode(self, enc: Any) -> Any:
        """Decode stored JSON into a fresh Python value."""
        return self.codec.decode(enc, self.resolve_blob)

    # -- writing -------------------------------------------------------------------------------

    def chan_from_disk(self, skey: tuple[str, str], store: SessionStore, ns: str, cp_id: str, ch: str) -> ChanState:
        """What the stored document `cp_id` says about channel `ch` (value loaded lazily)."""
        doc = store.doc(ns, cp_id)
        assert doc is not None
        home, entry = self.values.home_entry(store, ns, cp_id, ch)
        st = ChanState(doc["channel_versions"].get(ch), home)
        if "d" in entry:
            st.n, st.kb, st.db = entry.get("n", 0), entry.get("kb", 0), entry.get("db", 0)
        else:
            st.kb = size_of(entry.get("w"))
        return st

    def _enc_of(self, skey: tuple[str, str], store: SessionStore, ns: str, st: ChanState, ch: str) -> Any:
        if st.enc is _UNSET:
            st.enc = self.values.value(skey, store, ns, st.home, ch)
        return st.enc

    def encode_state(
        self,
        skey: tuple[str, str],
        store: SessionStore,
        ns: str,
        cp_id: str,
        checkpoint: Checkpoint,
        new_versions: Mapping[str, Any],
        head: HeadState | None,
        parent_id: str | None,
    ) -> tuple[dict[str, Any], dict[str, ChanState]]:
        """Entries for `task_state` and the new channel states; raises before any blob is written.

        The returned states also carry channels absent from this checkpoint (a DeltaChannel
        between snapshots), so the next snapshot can be a delta over the previous one.
        """
        versions = checkpoint["channel_versions"]
        self._notes = []
        parent_doc = store.doc(ns, parent_id) if parent_id and head is None else None
        plans: list[tuple[str, str, Any, ChanState | None]] = []
        for ch, value in checkpoint["channel_values"].items():
            prev = head.chans.get(ch) if head is not None else None
            if prev is None and parent_doc is not None and ch in parent_doc["task_state"]:
                prev = self.chan_from_disk(skey, store, ns, parent_id or "", ch)
            if prev is not None and ch not in new_versions and prev.version == versions.get(ch):
                plans.append((ch, "ref", None, prev))
                continue
            items = _list_of(value)
            if prev is not None and items is not None:
                old = prev.obj
                if old is _UNSET:
                    old = self.decode(self._enc_of(skey, store, ns, prev, ch))
                old_items = _list_of(old)
                if (
                    old_items is not None
                    and type(old) is type(value)
                    and len(items) >= len(old_items)
                    and items[: len(old_items)] == old_items
                ):
                    plans.append((ch, "delta", self.codec.encode(items[len(old_items) :]), prev))
                    continue
            plans.append((ch, "whole", self.codec.encode(value), prev))
        entries: dict[str, Any] = {}
        chans: dict[str, ChanState] = {}
        if head is not None:
            chans.update({c: st for c, st in head.chans.items() if c in versions})
        for ch, kind, enc, prev in plans:
            value = checkpoint["channel_values"][ch]
            ver = versions.get(ch)
            snap = _copy_value(value)
            if kind == "ref":
                assert prev is not None
                entries[ch] = {"ref": prev.home}
                chans[ch] = prev
                continue
            if kind == "delta":
                assert prev is not None
                add, pw, payload = self._delta_items(skey, ns, enc)
                # Count what the delta stands for, not its pointers: that is what a read rebuilds.
                n, db = prev.n + 1, prev.db + payload
                full = _extend(self._enc_of(skey, store, ns, prev, ch), enc)
                if n < self.keyframe_every or db < KEYFRAME_GROWTH * prev.kb:
                    entries[ch] = {"d": prev.home, "add": add, "n": n, "kb": prev.kb, "db": db}
                    if pw:
                        entries[ch]["pw"] = pw
                    self._notes.extend(
                        (strip_id(e)[0], [cp_id, ch, k])
                        for k, (e, a) in enumerate(zip(enc, add, strict=True))
                        if not (isinstance(a, dict) and PW_KEY in a)
                    )
                    chans[ch] = ChanState(ver, cp_id, n, prev.kb, db, full, snap)
                    self.values.remember((*skey, ns, cp_id, ch), full)
                    continue
                enc = full
            whole = spill(enc, self.blobs, self.inline_max)
            entries[ch] = {"w": whole}
            chans[ch] = ChanState(ver, cp_id, 0, size_of(whole), 0, enc, snap)
            self.values.remember((*skey, ns, cp_id, ch), enc)
        return entries, chans

    def _delta_items(self, skey: tuple[str, str], ns: str, enc: list[Any]) -> tuple[list[Any], list[str], int]:
        """Spilled delta items (a `$pw` pointer when a recent pending write holds one already),
        the checkpoints pointed at, and the bytes of the items themselves."""
        known = self._recent.get((*skey, ns))
        out: list[Any] = []
        used: set[str] = set()
        payload = 0
        for item in enc:
            key, msg_id = strip_id(item)
            ref = known.get(key) if known else None
            spilled = spill(item, self.blobs, self.inline_max)
            payload += size_of(spilled)
            if ref is not None:
                out.append({PW_KEY: ref, "id": msg_id})
                used.add(ref[0])
            else:
                out.append(spilled)
        return out, sorted(used), payload

    def commit_notes(self, skey: tuple[str, str], ns: str) -> None:
        """After the document is on disk: let late pending writes point at its delta items."""
        known = self._recent_deltas.setdefault((*skey, ns), OrderedDict())
        self._recent_deltas.move_to_end((*skey, ns))
        for h, ref in self._notes:
            known.setdefault(h, ref)
        self._notes = []
        while len(known) > _RECENT_ITEMS:
            known.popitem(last=False)
        while len(self._recent_deltas) > 64:
            self._recent_deltas.popitem(last=False)

    def note_writes(self, skey: tuple[str, str], rec: dict[str, Any], unspilled: list[Any]) -> None:
        """Remember the content of a stored writes record for later checkpoints' deltas."""
        key = (*skey, rec["checkpoint_ns"])
        known = self._recent.setdefault(key, OrderedDict())
        self._recent.move_to_end(key)
        for (idx, _ch, stored), enc in zip(rec["writes"], unspilled, strict=True):
            if idx < 0:
                continue
            elems = list(enumerate(enc)) if isinstance(enc, list) else [(-1, enc)]
            for j, e in elems:
                if _is_dl(stored[j] if j >= 0 else stored):
                    continue
                h = strip_id(e)[0]
                if h not in known:
                    known[h] = [rec["checkpoint_id"], rec["task_id"], idx, j]
        while len(known) > _RECENT_ITEMS:
            known.popitem(last=False)
        while len(self._recent) > 64:
            self._recent.popitem(last=False)

    def forget_writes(self) -> None:
        """Drop remembered writes and delta items (after a rewrite or delete)."""
        self._recent.clear()
        self._recent_deltas.clear()

    def document(
        self,
        ids: dict[str, Any],
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: dict[str, Any],
        task_state: dict[str, Any],
        parent_seen: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The checkpoint document of DESIGN §4 (plus the LangGraph fields needed to rebuild it)."""
        conf = config.get("configurable", {})
        snapshot = {k: self.codec.encode(conf.get(k)) for k in SNAPSHOT_KEYS}
        doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": ids["parent_id"],
            "checkpoint_ns": ids["ns"],
            "tenant_id": ids["tenant"],
            "agent_id": _scalar(conf.get("agent_id")),
            "session_id": ids["thread"],
            "branch_id": _scalar(conf.get("branch_id")),
            "turn": _scalar(conf.get("turn")),
            "run_id": ids["run"],
            "graph_version": _scalar(conf.get("graph_version")),
            "current_node": current_node(checkpoint["versions_seen"], parent_seen),
            "next_nodes": next_nodes(checkpoint),
            "task_state": task_state,
            "channel_versions": dict(checkpoint["channel_versions"]),
            "versions_seen": {k: dict(v) for k, v in checkpoint["versions_seen"].items()},
            "runtime_snapshot": snapshot,
            "config_digest": config_digest(conf, self.digest_keys),
            "metadata": self.codec.encode(metadata),
            "created_at": checkpoint["ts"],
            "checkpoint_format": checkpoint.get("v", 1),
            "updated_channels": checkpoint.get("updated_channels"),
        }
        if "pending_sends" in checkpoint:
            doc["pending_sends"] = self.codec.encode(checkpoint["pending_sends"])  # type: ignore[typeddict-item]
        return doc

    def writes_record(
        self, ids: dict[str, Any], writes: Sequence[tuple[str, Any]], task_id: str, task_path: str, skip: set[int]
    ) -> tuple[dict[str, Any], list[Any]] | None:
        """The record of one put_writes call, without ordinary writes already stored."""
        rows = []
        for i, (ch, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(ch, i)
            if idx >= 0 and idx in skip:
                continue
            rows.append([idx, ch, self.codec.encode(value)])
        if not rows:
            return None
        unspilled = [row[2] for row in rows]
        known = self._recent_deltas.get((ids["tenant"], ids["thread"], ids["ns"]))
        dl: set[str] = set()
        for row in rows:
            row[2] = self._spill_write(row[2], known if row[0] >= 0 else None, dl)
        rec = {
            "schema_version": SCHEMA_VERSION,
            "checkpoint_id": ids["cp_id"],
            "checkpoint_ns": ids["ns"],
            "task_id": task_id,
            "task_path": task_path,
            "writes": rows,
        }
        if dl:
            rec["dl"] = sorted(dl)
        return rec, unspilled

    def _spill_write(self, enc: Any, known: Mapping[bytes, list[Any]] | None, dl: set[str]) -> Any:
        """Spill a write value; elements a stored delta already holds become `$dl` pointers."""

        def one(e: Any) -> Any:
            if known:
                h, msg_id = strip_id(e)
                ref = known.get(h)
                if ref is not None:
                    dl.add(ref[0])
                    return {DL_KEY: ref, "id": msg_id}
            return spill(e, self.blobs, self.inline_max)

        if isinstance(enc, list):
            return [one(e) for e in enc]
        return one(enc)

    def resolve_dl(self, store: SessionStore, ns: str, enc: Any) -> Any:
        """A stored write value with its `$dl` pointers replaced by the delta items they name."""

        def one(e: Any) -> Any:
            if not _is_dl(e):
                return e
            cp, ch, k = e[DL_KEY]
            doc = store.doc(ns, cp)
            entry = (doc or {}).get("task_state", {}).get(ch) or {}
            items = entry.get("add")
            if not isinstance(items, list) or k >= len(items):
                reason = f"pending write points at missing item {cp}/{ch}/{k}"
                raise CorruptCheckpointError(str(store.runs_dir), 0, reason)
            return with_id(items[k], e.get("id"))

        return [one(e) for e in enc] if isinstance(enc, list) else one(enc)

    # -- reading -------------------------------------------------------------------------------

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
        return [
            (t, ch, self.decode(self.resolve_dl(store, ns, enc)))
            for (_, (t, ch, enc, _)) in rows
            if only is None or ch in only
        ]

    def to_tuple(self, skey: tuple[str, str], store: SessionStore, doc: dict[str, Any]) -> CheckpointTuple:
        """The LangGraph CheckpointTuple a stored document describes (fresh objects every call)."""
        ns, cp_id = doc["checkpoint_ns"], doc["checkpoint_id"]
        values = {ch: self.decode(self.values.value(skey, store, ns, cp_id, ch)) for ch in doc["task_state"]}
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


def _scalar(v: Any) -> Any:
    return v if v is None or isinstance(v, (str, int, float, bool)) else str(v)
