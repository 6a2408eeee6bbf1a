"""The saver's thread maintenance: what changes a thread's stored checkpoints besides `put` and
`put_writes`: deleting a thread or runs, copying a thread, pruning, retention (`keep_last`) and
the pins that retention keeps.

A mixin of `JsonlCheckpointSaver` (the saver gives the session stores, its lock and settings);
the rewrites themselves are `_saver_retention`'s.
"""

from __future__ import annotations

import builtins
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from langchain_core.runnables import RunnableConfig

from checkpointing import _saver_retention as retention
from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_ids import plain_id
from checkpointing._saver_store import SessionStore
from checkpointing.exceptions import CheckpointingError, InvalidIdError

_RETAIN_GROWTH = 4
"""While a run goes on, retention rewrites its file once it is this many times what the last pass
kept (fewer passes, each a pause of the run; the run's end applies `keep_last` exactly)."""


class ThreadMaintenance:
    """Mixin: delete, copy, prune, retain, pin and unpin (the saver provides the members below)."""

    _lock: AbstractContextManager[Any]
    _stores: OrderedDict[tuple[str, str], SessionStore]
    _retained: dict[tuple[str, str], int]
    docs: DocumentBuilder
    keep_last: int | None

    def _store(self, tenant: str, thread: str) -> SessionStore:
        raise NotImplementedError

    def _all_stores(self, tenant: str | None = None, thread: str | None = None) -> builtins.list[SessionStore]:
        raise NotImplementedError

    def _ids(self, config: RunnableConfig) -> dict[str, Any]:
        raise NotImplementedError

    def delete_thread(self, thread_id: str, *, tenant_id: str | None = None) -> None:
        """Remove every checkpoint and write of `thread_id`: in one tenant when given, else in every tenant."""
        thread = str(plain_id(thread_id))
        with self._lock:
            for store in self._all_stores(tenant_id, thread):
                store.remove()
                self._drop(store)

    def _drop(self, store: SessionStore) -> None:
        for k in [k for k, s in self._stores.items() if s is store]:
            del self._stores[k]

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove checkpoints (and their writes) of these runs: run directory or metadata run_id."""
        runs = {str(plain_id(r)) for r in run_ids}
        if not runs:
            return
        with self._lock:
            for store in self._all_stores():
                drop = {k for k, loc in store.index.cps.items() if loc.run in runs or loc.meta_run in runs}
                if drop:
                    retention.rewrite(self.docs, store, set(store.index.cps) - drop)

    def copy_thread(self, source_thread_id: str, target_thread_id: str, *, tenant_id: str | None = None) -> None:
        """Copy every checkpoint and write of a thread (whole parent chains) to a new thread.

        With `tenant_id` only that tenant's thread is copied (a server scoped to one tenant never
        reaches across); without it, the thread of every tenant, as LangGraph's savers do.
        """
        src, dst = str(plain_id(source_thread_id)), str(plain_id(target_thread_id))
        with self._lock:
            for store in self._all_stores(tenant_id, src):
                tenant = store.tenant
                target = self._store(tenant, dst)
                if target.exists():
                    raise CheckpointingError(
                        f"copy_thread: target thread {dst!r} already has checkpoints; pick a new id"
                    )
                retention.copy_session(store, target, dst)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """ "keep_latest": keep the newest checkpoint per namespace (plus pinned ones and the
        DeltaChannel bases they need); "delete": remove the threads."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for tid in thread_ids:
            if strategy == "delete":
                self.delete_thread(tid)
                continue
            with self._lock:
                for store in self._all_stores(None, str(plain_id(tid))):
                    idx = store.index
                    seeds = {(ns, cp) for ns, cp in idx.latest.items()} | (store.pins() & set(idx.cps))
                    keep = seeds
                    if keep != set(idx.cps):
                        retention.rewrite(self.docs, store, keep)

    def retain(self, config: RunnableConfig) -> None:
        """Apply `keep_last` to the run of `config` now (puts apply it as the run grows)."""
        if self.keep_last is None:
            raise ValueError("retain needs keep_last")
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            if store.exists():
                retention.retain(self.docs, store, ids["run"], self.keep_last)

    def _maybe_retain(self, store: SessionStore, run: str, final: bool) -> None:
        """Apply `keep_last` when the run's graph finished (`final`), and while it runs when it holds
        over twice `keep_last` checkpoints and its file has grown `_RETAIN_GROWTH` times since the
        last pass (a pass rewrites the file: geometric growth keeps a long run's rewrites at O(its
        size) in all)."""
        assert self.keep_last is not None
        idx = store.index
        count = idx.counts.get(run, 0)
        if count <= self.keep_last:
            return
        rkey = (store.key, run)
        size = idx.ends.get(run, (0, 0))[0]
        grown = count > 2 * max(self.keep_last, 4) and size >= _RETAIN_GROWTH * self._retained.get(rkey, 0)
        if not (final or grown):
            return
        retention.retain(self.docs, store, run, self.keep_last)
        self._retained[rkey] = store.index.ends.get(run, (0, 0))[0]

    # -- pins ----------------------------------------------------------------------------------

    def pin(self, config: RunnableConfig) -> None:
        """Keep checkpoint `config` (e.g. a branch point) through retention and prune."""
        ids = self._ids(config)
        if not ids["cp_id"]:
            raise InvalidIdError("pin needs config['configurable']['checkpoint_id']")
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            store.update_pins(lambda pins: pins | {(ids["ns"], ids["cp_id"])})

    def unpin(self, config: RunnableConfig) -> None:
        """Let retention drop checkpoint `config` again."""
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            store.update_pins(lambda pins: pins - {(ids["ns"], ids["cp_id"] or "")})
