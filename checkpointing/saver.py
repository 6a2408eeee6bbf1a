"""JsonlCheckpointSaver: a LangGraph checkpoint saver writing versioned JSONL documents.

    base_dir/tenants/<tenant>/sessions/<thread_id>/runs/<run_id>/checkpoints.jsonl
    base_dir/tenants/<tenant>/sessions/<thread_id>/runs/<run_id>/writes.jsonl
    base_dir/blobs/sha256/<2 hex>/<62 hex>

`thread_id` is the session, the tenant comes from `config["configurable"]["tenant_id"]` and the run
from `config["configurable"]["run_id"]` (defaults when absent); `checkpoint_ns` is a field of each
record, never a path. Usable in any LangGraph graph:

    graph = builder.compile(checkpointer=JsonlCheckpointSaver("./.agentrt"))

Every async method runs the file work in a worker thread, so the event loop never blocks.
"""

from __future__ import annotations

import builtins
import copy
import threading
import uuid
from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_serializable_checkpoint_metadata,
)

from checkpointing import _saver_retention as retention
from checkpointing._saver_async import AsyncSaverMethods
from checkpointing._saver_delta import delta_history
from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_state import HeadState
from checkpointing._saver_store import CHECKPOINTS, WRITES, SessionStore, fsync_policy_ok
from checkpointing.blobs import BlobStore
from checkpointing.codec import CheckpointStateCodec, CodecSerializer
from checkpointing.digest import scrub_secrets
from checkpointing.errors import CheckpointingError, InvalidIdError
from checkpointing.fencing import FencingGuard
from checkpointing.ids import validate_id
from checkpointing.validation import DocumentExpectations, check_schema_version, validate_document

DEFAULT_CONFIG_DIGEST_KEYS = (
    "agent_id",
    "graph_version",
    "surface_digest",
    "toolset_hash",
    "model",
    "model_name",
    "llm_model_config",
    "agent_config",
)
_MAX_NS = 1024
_MAX_OPEN_SESSIONS = 128


class JsonlCheckpointSaver(AsyncSaverMethods, BaseCheckpointSaver[int]):
    """LangGraph checkpointer over crash-safe JSONL files, blobs and an index (sync and async).

    Args:
        base_dir: the persistence volume (must be mounted in containers).
        inline_payload_max_bytes: JSON subtrees larger than this go to the blob store.
        fsync: "always" (each record durable when the call returns) or "batch" (durable at
            `flush()`, or when the OS writes back).
        keep_last: checkpoints kept per run and namespace (None: keep all); never drops one that a
            kept checkpoint needs, nor a pinned one (see `pin`).
        keyframe_every: minimum deltas between two full keyframes of an append-only channel.
        expected_graph_version / expected_surface_digest / expected_toolset_hash: when set, a
            loaded checkpoint that differs raises `DocumentMismatch` instead of being returned.
        default_tenant / default_run: used when the config carries no tenant_id / run_id.
        config_digest_keys: the allowlist of `configurable` keys the config digest covers.
    """

    def __init__(
        self,
        base_dir: str | Path,
        *,
        inline_payload_max_bytes: int = 8192,
        fsync: str = "always",
        keep_last: int | None = None,
        keyframe_every: int = 16,
        expected_graph_version: str | None = None,
        expected_surface_digest: str | None = None,
        expected_toolset_hash: str | None = None,
        default_tenant: str = "default",
        default_run: str = "main",
        config_digest_keys: Sequence[str] = DEFAULT_CONFIG_DIGEST_KEYS,
        codec: CheckpointStateCodec | None = None,
    ) -> None:
        self.codec = codec or CheckpointStateCodec()
        super().__init__(serde=CodecSerializer(self.codec))
        if keep_last is not None and keep_last < 1:
            raise ValueError("keep_last must be None or >= 1")
        if keyframe_every < 1 or inline_payload_max_bytes < 64:
            raise ValueError("keyframe_every must be >= 1 and inline_payload_max_bytes >= 64")
        self.base_dir = Path(base_dir)
        self.fsync = fsync_policy_ok(fsync)
        self.keep_last = keep_last
        self.default_tenant = validate_id(default_tenant, "default_tenant")
        self.default_run = validate_id(default_run, "default_run")
        self.expectations = DocumentExpectations(
            graph_version=expected_graph_version,
            surface_digest=expected_surface_digest,
            toolset_hash=expected_toolset_hash,
        )
        self.blobs = BlobStore(self.base_dir)
        self.docs = DocumentBuilder(
            self.codec, self.blobs, inline_payload_max_bytes, keyframe_every, config_digest_keys
        )
        self._lock = threading.RLock()
        # Bounded: a process serving many sessions keeps only the recently used ones in memory.
        self._stores: OrderedDict[tuple[str, str], SessionStore] = OrderedDict()
        self._heads: OrderedDict[tuple[str, str, str], HeadState] = OrderedDict()
        self._retained: dict[tuple[str, str, str], int] = {}
        self._guards: dict[tuple[str, str], FencingGuard] = {}

    # -- helpers -------------------------------------------------------------------------------

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> JsonlCheckpointSaver:
        """No msgpack here, so LangGraph's msgpack allowlist does not apply: the saver itself."""
        return self

    def _session_dir(self, tenant: str, thread: str) -> Path:
        return self.base_dir / "tenants" / tenant / "sessions" / thread

    def _store(self, tenant: str, thread: str) -> SessionStore:
        key = (tenant, thread)
        store = self._stores.get(key)
        if store is None:
            store = SessionStore(self._session_dir(tenant, thread), self.fsync)
            self._stores[key] = store
            while len(self._stores) > _MAX_OPEN_SESSIONS:
                _, old = self._stores.popitem(last=False)
                old.sync()
        self._stores.move_to_end(key)
        store.begin()
        return store

    def _ids(self, config: RunnableConfig) -> dict[str, Any]:
        conf = config.get("configurable") or {}
        if "thread_id" not in conf:
            raise InvalidIdError("config['configurable']['thread_id'] is required: it names the session")
        ns = conf.get("checkpoint_ns", "") or ""
        if not isinstance(ns, str) or len(ns) > _MAX_NS or "\x00" in ns:
            raise InvalidIdError(f"invalid checkpoint_ns {str(ns)[:80]!r}: a string without NUL, <= {_MAX_NS} chars")
        cp_id = conf.get("checkpoint_id")
        return {
            "tenant": validate_id(_str(conf.get("tenant_id") or self.default_tenant), "tenant_id"),
            "thread": validate_id(_str(conf["thread_id"]), "thread_id"),
            "run": validate_id(_str(conf.get("run_id") or self.default_run), "run_id"),
            "ns": ns,
            "cp_id": validate_id(_str(cp_id), "checkpoint_id") if cp_id else None,
        }

    def _fence(self, ids: dict[str, Any], config: RunnableConfig) -> AbstractContextManager[Any]:
        """Refuse the write when it carries a lease token lower than the session's highest (stale owner)."""
        token = (config.get("configurable") or {}).get("fencing_token")
        if not isinstance(token, int) or isinstance(token, bool):
            return nullcontext()
        key = (ids["tenant"], ids["thread"])
        guard = self._guards.get(key)
        if guard is None:
            guard = self._guards[key] = FencingGuard(self._session_dir(*key))
        return guard.fenced(token)

    def _all_stores(self, tenant: str | None = None, thread: str | None = None) -> builtins.list[SessionStore]:
        root = self.base_dir / "tenants"
        tenants = [tenant] if tenant else sorted(p.name for p in root.iterdir()) if root.exists() else []
        out: builtins.list[SessionStore] = []
        for t in tenants:
            sessions = root / t / "sessions"
            names = [thread] if thread else sorted(p.name for p in sessions.iterdir()) if sessions.exists() else []
            out.extend(self._store(t, n) for n in names if (sessions / n / "runs").exists())
        return out

    def _forget(self, store: SessionStore) -> None:
        for k in [k for k in self._heads if self._stores.get(k[:2]) is store]:
            del self._heads[k]
        self.docs.values.clear()
        self.docs.forget_writes()
        store.forget_logs()

    def _load(self, store: SessionStore, ns: str, cp_id: str, tenant: str) -> CheckpointTuple | None:
        doc = store.doc(ns, cp_id)
        if doc is None:
            return None
        check_schema_version(doc, f"checkpoint {cp_id} in {store.runs_dir}")
        if not self.expectations.is_empty():
            exp = DocumentExpectations(tenant_id=tenant, **{k: v for k, v in vars(self.expectations).items() if v})
            validate_document(doc, exp)
        return self.docs.to_tuple((tenant, doc["session_id"]), store, doc)

    # -- sync API ------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by `config` (its checkpoint_id, else the latest of thread + ns)."""
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            if not store.runs_dir.exists():
                return None
            cp_id = ids["cp_id"] or store.index.latest.get(ids["ns"])
            return None if cp_id is None else self._load(store, ids["ns"], cp_id, ids["tenant"])

    def get_document(self, config: RunnableConfig) -> dict[str, Any] | None:
        """The raw stored document (for recovery and doctor); schema version checked."""
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            if not store.runs_dir.exists():
                return None
            cp_id = ids["cp_id"] or store.index.latest.get(ids["ns"])
            doc = store.doc(ids["ns"], cp_id) if cp_id else None
            if doc is not None:
                check_schema_version(doc)
            return copy.deepcopy(doc)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, matching thread / ns / metadata `filter`, before `before`."""
        yield from self._list(config, filter, before, limit)

    def _list(
        self,
        config: RunnableConfig | None,
        filt: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> builtins.list[CheckpointTuple]:
        conf = (config or {}).get("configurable") or {}
        tenant = validate_id(_str(conf.get("tenant_id") or self.default_tenant), "tenant_id") if config else None
        thread = validate_id(_str(conf["thread_id"]), "thread_id") if conf.get("thread_id") else None
        ns_filter = conf.get("checkpoint_ns") if "checkpoint_ns" in conf else None
        only_id = conf.get("checkpoint_id")
        before_id = ((before or {}).get("configurable") or {}).get("checkpoint_id")
        out: builtins.list[CheckpointTuple] = []
        with self._lock:
            for store in self._all_stores(tenant, thread):
                t = store.dir.parent.parent.name
                keys = sorted(store.index.cps, key=lambda k: k[1], reverse=True)
                for ns, cp_id in keys:
                    if limit is not None and len(out) >= limit:
                        return out
                    if (ns_filter is not None and ns != ns_filter) or (only_id and cp_id != only_id):
                        continue
                    if before_id and cp_id >= before_id:
                        continue
                    if filt:
                        doc = store.doc(ns, cp_id)
                        meta = self.docs.decode(doc["metadata"]) if doc else {}
                        if not all(meta.get(k) == v for k, v in filt.items()):
                            continue
                    tup = self._load(store, ns, cp_id, t)
                    if tup is not None:
                        out.append(tup)
        return out

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append one checkpoint document; unchanged channels by reference, appends as deltas."""
        ids = self._ids(config)
        cp_id = validate_id(_str(checkpoint["id"]), "checkpoint id")
        ids["parent_id"] = ids["cp_id"]
        # LangGraph copies every scalar of configurable into metadata: never persist secret-looking ones.
        meta = scrub_secrets(get_serializable_checkpoint_metadata(config, metadata))
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            skey = (ids["tenant"], ids["thread"])
            hkey = (*skey, ids["ns"])
            head = self._heads.get(hkey)
            if head is not None and head.cp_id != ids["parent_id"]:
                head = None
            task_state, chans = self.docs.encode_state(
                skey, store, ids["ns"], cp_id, checkpoint, new_versions, head, ids["parent_id"]
            )
            parent_seen = head.versions_seen if head else self._parent_seen(store, ids)
            doc = self.docs.document(ids, config, checkpoint, meta, task_state, parent_seen)
            with self._fence(ids, config):
                store.append(ids["run"], CHECKPOINTS, doc)
            self.docs.commit_notes(skey, ids["ns"])
            self._heads[hkey] = HeadState(cp_id, doc["versions_seen"], chans)
            self._heads.move_to_end(hkey)
            while len(self._heads) > _MAX_OPEN_SESSIONS:
                self._heads.popitem(last=False)
            if self.keep_last is not None:
                self._maybe_retain(store, ids["run"])
        return {"configurable": {"thread_id": ids["thread"], "checkpoint_ns": ids["ns"], "checkpoint_id": cp_id}}

    def _parent_seen(self, store: SessionStore, ids: dict[str, Any]) -> dict[str, Any] | None:
        if not ids["parent_id"] or not store.runs_dir.exists():
            return None
        doc = store.doc(ids["ns"], ids["parent_id"])
        return doc["versions_seen"] if doc else None

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for a checkpoint: first ordinary write per idx wins, specials replace."""
        ids = self._ids(config)
        if ids["cp_id"] is None:
            raise InvalidIdError("put_writes needs config['configurable']['checkpoint_id']")
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            loc = store.index.cps.get((ids["ns"], ids["cp_id"])) if store.runs_dir.exists() else None
            run = loc.run if loc else ids["run"]
            done = {i for w in store.index.writes.get((ids["ns"], ids["cp_id"]), []) for t, i in w.keys if t == task_id}
            built = self.docs.writes_record(ids, writes, str(task_id), task_path, done)
            if built is not None:
                with self._fence(ids, config):
                    store.append(run, WRITES, built[0])
                self.docs.note_writes((ids["tenant"], ids["thread"]), built[0], built[1])

    def delete_thread(self, thread_id: str) -> None:
        """Remove every checkpoint and write of `thread_id`, in every tenant."""
        thread = validate_id(_str(thread_id), "thread_id")
        with self._lock:
            for store in self._all_stores(None, thread):
                self._forget(store)
                store.remove()

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove checkpoints (and their writes) of these runs: run directory or metadata run_id."""
        runs = {_str(r) for r in run_ids}
        if not runs:
            return
        with self._lock:
            for store in self._all_stores():
                drop = {k for k, loc in store.index.cps.items() if loc.run in runs or loc.meta_run in runs}
                if drop:
                    keep = set(store.index.cps) - drop
                    retention.rewrite(self.docs, store, keep, materialize=True)
                    self._forget(store)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread (whole parent chains) to a new thread."""
        src = validate_id(_str(source_thread_id), "thread_id")
        dst = validate_id(_str(target_thread_id), "thread_id")
        with self._lock:
            for store in self._all_stores(None, src):
                tenant = store.dir.parent.parent.name
                target = self._store(tenant, dst)
                if target.runs_dir.exists() and target.index.cps:
                    raise CheckpointingError(
                        f"copy_thread: target thread {dst!r} already has checkpoints; pick a new id"
                    )
                retention.copy_session(store, target, dst)
                self._forget(target)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """ "keep_latest": keep the newest checkpoint per namespace (plus pinned ones and what
        DeltaChannel history needs), rewritten self-contained; "delete": remove the threads."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for tid in thread_ids:
            if strategy == "delete":
                self.delete_thread(tid)
                continue
            thread = validate_id(_str(tid), "thread_id")
            with self._lock:
                for store in self._all_stores(None, thread):
                    idx = store.index
                    seeds = {(ns, cp) for ns, cp in idx.latest.items()} | (store.pins() & set(idx.cps))
                    keep = retention.closure(self.docs, store, seeds, follow_refs=False)
                    if keep != set(idx.cps):
                        retention.rewrite(self.docs, store, keep, materialize=True)
                        self._forget(store)

    def _maybe_retain(self, store: SessionStore, run: str) -> None:
        assert self.keep_last is not None
        rkey = (str(store.dir), run, "")
        in_run = [k for k, loc in store.index.cps.items() if loc.run == run]
        if len(in_run) < 2 * max(self.keep_last, self._retained.get(rkey, 0), 8):
            return
        kept = retention.retain(self.docs, store, run, self.keep_last)
        self._retained[rkey] = kept
        self._forget(store)

    # -- pins ----------------------------------------------------------------------------------

    def pin(self, config: RunnableConfig) -> None:
        """Keep checkpoint `config` (e.g. a branch point) through retention and prune."""
        ids = self._ids(config)
        if not ids["cp_id"]:
            raise InvalidIdError("pin needs config['configurable']['checkpoint_id']")
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            store.set_pins(store.pins() | {(ids["ns"], ids["cp_id"])})

    def unpin(self, config: RunnableConfig) -> None:
        """Let retention drop checkpoint `config` again."""
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            store.set_pins(store.pins() - {(ids["ns"], ids["cp_id"] or "")})

    def flush(self) -> None:
        """Make every record appended so far durable (for fsync="batch")."""
        with self._lock:
            for store in self._stores.values():
                store.sync()

    # -- DeltaChannel fast path ----------------------------------------------------------------

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per channel: writes on the parent chain (oldest first) and the nearest stored seed.

        Walks the in-memory index (parents, which channels each document stores) and reads only
        the pending writes and the one seed value it needs, instead of whole checkpoints.
        """
        if not channels:
            return {}
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            return delta_history(self.docs, store, (ids["tenant"], ids["thread"]), ids, channels)


def _str(v: Any) -> Any:
    return str(v) if isinstance(v, uuid.UUID) else v
