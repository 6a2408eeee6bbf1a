"""JsonlCheckpointSaver: a LangGraph checkpoint saver writing checksummed JSONL records.

    base_dir/tenants/<tenant>/sessions/<thread>/runs/<run>/checkpoints.jsonl

`thread_id` is the session, the tenant comes from `config["configurable"]["tenant_id"]` and the
run from `config["configurable"]["run_id"]` (defaults when absent), on every read and write;
`checkpoint_ns` is a field of each record, never a path. Usable in any LangGraph graph:

    graph = builder.compile(checkpointer=JsonlCheckpointSaver("./.state"))

Reading values back rebuilds only classes on the codec's allowlist (others are `StoredObject`
stand-ins, see `checkpointing.codec`). LangGraph hands a saver its graph's classes (`with_allowlist`)
only when `LANGGRAPH_STRICT_MSGPACK` is set; without it, allow them once after compiling:

    saver.allow_graph(graph)

Over PostgreSQL instead of files (the same JSONL lines, one row each; tables made by `setup`):

    saver = JsonlCheckpointSaver.from_url("postgresql://postgres@127.0.0.1:5432/test")
    # or: store = PostgresStore(url, schema="checkpoints"); store.setup(); JsonlCheckpointSaver(store=store)

Channel versions are strings like InMemorySaver's, shorter (`get_next_version`); versions of any JSON type
(int, float, str) written by other savers are stored as given, and a thread with int or float versions
goes on with versions of that type. Every async method runs the file (or database)
work in a worker thread, so the event loop never blocks.
"""

from __future__ import annotations

import builtins
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
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

from checkpointing._saver_async import AsyncSaverMethods
from checkpointing._saver_delta import delta_history
from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_ids import call_ids, fencing_token, plain_id
from checkpointing._saver_store import SessionStore
from checkpointing._saver_texts import StoredTexts
from checkpointing._saver_threads import ThreadMaintenance
from checkpointing._saver_versions import Version, next_version
from checkpointing.codec import CheckpointStateCodec, CodecSerializer
from checkpointing.commit_group import CommitGroup
from checkpointing.digest import scrub_secrets
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id
from checkpointing.records import FsyncPolicy, fsync_policy_ok
from checkpointing.store import Store, open_store
from checkpointing.store.file_store import FileStore
from checkpointing.typewalk import graph_classes
from checkpointing.validation import validate_metadata

_MAX_OPEN_SESSIONS = 128
DocumentHook = Callable[[dict[str, Any]], None]
SnapshotHook = Callable[[Checkpoint, Mapping[str, Any]], Mapping[str, Any] | None]
"""The `runtime_snapshot` hook: (checkpoint, metadata) -> the document's runtime snapshot."""


class JsonlCheckpointSaver(StoredTexts, ThreadMaintenance, AsyncSaverMethods, BaseCheckpointSaver[str]):
    """LangGraph checkpointer over crash-safe JSONL files (sync and async).

    Args:
        base_dir: the persistence volume (must be mounted in containers); or
        store: where records live instead (`checkpointing.store`: `FileStore(base_dir)`, or
            `PostgresStore(url)` whose record rows hold the same JSONL lines; see `from_url`).
        item_min_bytes: list items (and dict values) of stored values and writes at least this
            big are stored once per session under their content hash (see `_saver_docs`).
        fsync: "always" (every record durable when the call returns), "checkpoint" (pending
            writes reach disk with the next checkpoint of the run: one fsync per superstep; a
            crash may lose the writes of finished tasks, which then run again), or "batch"
            (durable at `flush()`, at the `group` barrier, or when the OS writes back). On
            PostgreSQL: a commit that does not wait for the WAL flush stands for "no fsync".
        group: a `commit_group.CommitGroup` shared with other logs (event log, tool journal): inside
            `group.deferred()` this saver's appends reach disk at the group's one barrier.
        keep_last: checkpoints kept per run and namespace (None: keep all); never drops one a
            kept checkpoint needs (its DeltaChannel bases), a branch head, nor a pinned one.
        allowed_types: classes the codec may rebuild from stored data (see `codec`); add a
            compiled graph's own with `allow_graph(graph)` (LangGraph passes them through
            `with_allowlist` only when `LANGGRAPH_STRICT_MSGPACK` is set).
        expect_metadata: metadata keys a loaded checkpoint must carry with these values, else
            `DocumentMismatch` (how a caller pins graph version, digests, ...).
        validate: called with each loaded document (a plain dict); may raise to refuse it.
        runtime_snapshot: called on every `put` with (checkpoint, metadata); the JSON-able
            mapping it returns is the document's `runtime_snapshot` (what the caller wants to
            see beside the state without decoding it: the pins it validates, a summary...).
            Identical snapshots are stored once per session. Without it (or when it returns
            None), a mapping under metadata key "runtime_snapshot" is used, else `{}`.
        default_tenant / default_run: used when the config carries no tenant_id / run_id.
    """

    def __init__(
        self,
        base_dir: str | Path | None = None,
        *,
        store: Store | None = None,
        item_min_bytes: int = 64,
        fsync: str = "always",
        group: CommitGroup | None = None,
        keep_last: int | None = None,
        allowed_types: Collection[type] = (),
        expect_metadata: Mapping[str, Any] | None = None,
        validate: DocumentHook | None = None,
        default_tenant: str = "default",
        default_run: str = "main",
        codec: CheckpointStateCodec | None = None,
        runtime_snapshot: SnapshotHook | None = None,
        **_legacy: Any,
    ) -> None:
        self.codec = codec or CheckpointStateCodec(allowed_types)
        super().__init__(serde=CodecSerializer(self.codec))
        if keep_last is not None and keep_last < 1:
            raise ValueError("keep_last must be None or >= 1")
        if item_min_bytes < 16:
            raise ValueError("item_min_bytes must be >= 16")
        if (base_dir is None) == (store is None):
            raise ValueError("give JsonlCheckpointSaver a base_dir or a store=, not both")
        self.store: Store = store if store is not None else FileStore(base_dir or ".", group)
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.fsync = fsync_policy_ok(fsync)
        self.group = group
        self.keep_last = keep_last
        self.expect_metadata = dict(expect_metadata or {})
        self.validate = validate
        self.runtime_snapshot = runtime_snapshot
        self.default_tenant = validate_id(default_tenant, "default_tenant")
        self.default_run = validate_id(default_run, "default_run")
        self.docs = DocumentBuilder(self.codec, item_min_bytes)
        self._lock = threading.RLock()
        # Bounded: a process serving many sessions keeps only the recently used ones in memory.
        self._stores: OrderedDict[tuple[str, str], SessionStore] = OrderedDict()
        self._retained: dict[tuple[str, str], int] = {}

    @classmethod
    def from_url(cls, url: str | Path, *, schema: str = "public", **kwargs: Any) -> JsonlCheckpointSaver:
        """A saver over the store `url` names: `postgresql://...` (PostgreSQL, its tables in
        `schema`, created if missing) or a folder (files). Other arguments as for the constructor."""
        store = open_store(url, group=kwargs.get("group"), schema=schema)
        return cls(store=store, **kwargs)

    def setup(self) -> None:
        """Create the store's tables if missing (PostgreSQL; nothing to do for files). Safe to
        call twice and from several processes at once."""
        setup = getattr(self.store, "setup", None)
        if setup is not None:
            setup()

    def close(self) -> None:
        """Flush, then release the store's connections (the saver is not used after)."""
        self.flush()
        self.store.close()

    # -- LangGraph hooks -----------------------------------------------------------------------

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> JsonlCheckpointSaver:
        """Allow the classes named `(module, name)` (already loaded ones only; nothing is imported).

        LangGraph calls this while compiling a graph only when the environment variable
        `LANGGRAPH_STRICT_MSGPACK` is set (to 1/true/yes); otherwise call `allow_graph`.
        """
        self.codec.allow_names(extra_allowlist)
        return self

    def allow_graph(self, graph: Any) -> set[type]:
        """Allow the classes a compiled graph's types name; returns them.

        Walks the state, input, output and context schemas, node and branch input schemas and
        channel types of `graph` and its subgraphs (`checkpointing.typewalk.graph_classes`):
        pydantic models, dataclasses, enums and named tuples found there, at any depth, read back
        as themselves instead of `StoredObject` stand-ins. Call it once after `compile`:

            saver.allow_graph(builder.compile(checkpointer=saver))
        """
        found = graph_classes(graph)
        self.codec.allow(*found)
        return found

    def get_next_version(self, current: Version | None, channel: None = None) -> Any:
        """The next channel version, of the type the thread already uses (`_saver_versions.next_version`)."""
        return next_version(current)

    def index_from(self, tenant: str, thread: str, run: str, recs: list[tuple[int, dict[str, Any]]], good: int) -> None:
        """Index one run file of a session from records the caller has just read and verified
        (see `SessionStore.index_from`), for a tool that reads every file anyway (an inspector)."""
        self._store(tenant, thread).index_from(run, recs, good)

    # -- helpers -------------------------------------------------------------------------------

    def _store(self, tenant: str, thread: str) -> SessionStore:
        key = (tenant, thread)
        store = self._stores.get(key)
        if store is None:
            log_policy: FsyncPolicy = "batch" if self.fsync == "batch" else "always"
            store = SessionStore(self.store.session(tenant, thread, log_policy))
            self._stores[key] = store
            while len(self._stores) > _MAX_OPEN_SESSIONS:
                _, old = self._stores.popitem(last=False)
                old.sync()
                old.close_files()
        self._stores.move_to_end(key)
        store.begin()
        return store

    def _ids(self, config: RunnableConfig) -> dict[str, Any]:
        return call_ids(config, self.default_tenant, self.default_run)

    def _all_stores(self, tenant: str | None = None, thread: str | None = None) -> builtins.list[SessionStore]:
        return [self._store(t, n) for t, n in self.store.threads(tenant, thread)]

    def _check(self, doc: dict[str, Any], store: SessionStore) -> None:
        if not self.expect_metadata and self.validate is None:
            return
        view = self.docs.document_view(store, doc)
        validate_metadata(view, self.expect_metadata)
        if self.validate is not None:
            self.validate(view)

    def _load(self, store: SessionStore, ns: str, cp_id: str) -> CheckpointTuple | None:
        doc = store.doc(ns, cp_id)
        if doc is None:
            return None
        self._check(doc, store)
        tenant = doc["tenant_id"]
        return self.docs.to_tuple(store, doc, None if tenant == self.default_tenant else tenant)

    # -- sync API ------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by `config` (its checkpoint_id, else the latest of thread + ns)."""
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            cp_id = ids["cp_id"] or store.index.latest.get(ids["ns"])
            return None if cp_id is None else self._load(store, ids["ns"], cp_id)

    def get_document(self, config: RunnableConfig) -> dict[str, Any] | None:
        """The stored checkpoint document (values left out, metadata decoded), for a caller's
        checks before resuming, or an inspection tool."""
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            cp_id = ids["cp_id"] or store.index.latest.get(ids["ns"])
            doc = store.doc(ids["ns"], cp_id) if cp_id else None
            return None if doc is None else self.docs.document_view(store, doc)

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
        tenant = validate_id(plain_id(conf.get("tenant_id") or self.default_tenant), "tenant_id") if config else None
        thread = str(conf["thread_id"]) if conf.get("thread_id") is not None else None
        ns_filter = conf.get("checkpoint_ns") if "checkpoint_ns" in conf else None
        only_id = conf.get("checkpoint_id")
        before_id = ((before or {}).get("configurable") or {}).get("checkpoint_id")
        out: builtins.list[CheckpointTuple] = []
        with self._lock:
            for store in self._all_stores(tenant, thread):
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
                        meta = self.docs.metadata(doc, store) if doc else {}
                        if not all(meta.get(k) == v for k, v in filt.items()):
                            continue
                    tup = self._load(store, ns, cp_id)
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
        """Append one checkpoint record; values only for channels in `new_versions`."""
        ids = self._ids(config)
        cp_id = str(checkpoint["id"])
        ids["parent_id"] = ids["cp_id"]
        # LangGraph copies every scalar of configurable into metadata: never persist secret-looking ones.
        meta = scrub_secrets(get_serializable_checkpoint_metadata(config, metadata))
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            parent = store.doc(ids["ns"], ids["parent_id"]) if ids["parent_id"] else None
            new: dict[str, bytes] = {}
            seen = parent["versions_seen"] if parent else None
            snap = self.runtime_snapshot(checkpoint, meta) if self.runtime_snapshot is not None else None
            rec = self.docs.checkpoint_record(ids, config, checkpoint, meta, new_versions, store, seen, new, snap)
            wait = store.append(ids["run"], rec, items=new, token=fencing_token(config))
            if self.keep_last is not None:
                # A LangGraph run's last checkpoint (nothing next) ends the run: retention applies exactly.
                final = not rec["next_nodes"] and meta.get("source") == "loop"
                self._maybe_retain(store, ids["run"], final=final)
        if wait is not None:
            wait()  # outside the lock: concurrent puts and put_writes share one fsync
        out: dict[str, Any] = {"thread_id": ids["thread"], "checkpoint_ns": ids["ns"], "checkpoint_id": cp_id}
        if ids["tenant"] != self.default_tenant:
            out["tenant_id"] = ids["tenant"]
        return {"configurable": out}

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
            loc = store.index.cps.get((ids["ns"], ids["cp_id"]))
            run = loc.run if loc else ids["run"]
            done = {
                i
                for w in store.index.writes.get((ids["ns"], ids["cp_id"]), [])
                if w.task == str(task_id)
                for i in w.idxs
            }
            new: dict[str, bytes] = {}
            rec = self.docs.writes_record(ids, writes, str(task_id), task_path, done, store, new)
            wait = None
            if rec is not None:
                durable = False if self.fsync == "checkpoint" else None
                wait = store.append(run, rec, durable=durable, items=new, token=fencing_token(config))
        if wait is not None:
            wait()

    def flush(self) -> None:
        """Make every record appended so far durable (for fsync="batch"), and persist the indexes."""
        with self._lock:
            for store in self._stores.values():
                store.sync()

    def save_indexes(self) -> None:
        """Persist the index of every run file this saver appended to (no fsync: it is a cache),
        so the next process that opens those sessions reads only what was appended after. Also
        done on its own as a run file grows, and by `flush`; call it when a run ends."""
        with self._lock:
            for store in self._stores.values():
                store.save_index()

    # -- DeltaChannel fast path ----------------------------------------------------------------

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per channel: writes on the parent chain (oldest first) and the nearest stored seed.

        Walks the in-memory index and reads only the records it needs; the tenant comes from
        the config like every other read.
        """
        if not channels:
            return {}
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            target = ids["cp_id"] or store.index.latest.get(ids["ns"])
            return delta_history(self.docs, store, ids["ns"], target, channels)
