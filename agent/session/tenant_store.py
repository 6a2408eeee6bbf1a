"""LangGraph's store as one tenant sees it: a `BaseStore` whose every namespace lives under
`("tenants", <tenant>)` of the shared store (`agent.session.item_store`).

Every op is rewritten on the way in (the tenant's labels put before its namespace, its namespace
prefix, its listing's prefix condition; `max_depth` counts them) and every answer on the way out
(the labels taken off again), so a tenant's calls cannot name, find or list another tenant's items,
and its answers look as if the store were its own. A listing with a suffix condition is filtered
here: the store would match a suffix against the tenant's own labels too.

`LazyStore` opens the shared store on first use, so a run that never touches it opens nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

SCOPE_ROOT = "tenants"
ASSISTANTS_ROOT = "agentrt-assistants"
"""The first label of the namespace `(ASSISTANTS_ROOT, tenant)` of a tenant's assistants (`agent.serve.assistants`):
outside the `SCOPE_ROOT` part, so the store API never reaches them."""
_ALL = 2**62
"""A listing's limit meaning "all of them" (the stores take a 64-bit LIMIT)."""
_MAX_DEPTH = 2**31 - 1
"""Deeper than any namespace: the PostgreSQL store takes `max_depth` as a 32-bit integer."""


def tenant_scope(tenant_id: str) -> tuple[str, ...]:
    """The labels every namespace of `tenant_id` starts with in the shared store."""
    return (SCOPE_ROOT, tenant_id)


class TenantStore(BaseStore):
    """`base` seen by one tenant (see the module docstring)."""

    supports_ttl = True

    def __init__(self, base: BaseStore, tenant_id: str) -> None:
        self.base = base
        self.scope = tenant_scope(tenant_id)
        self.ttl_config = base.ttl_config

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The ops on the tenant's part of `base`, answered as if it were the whole store."""
        ops = list(ops)
        out: list[Result] = [None] * len(ops)
        plain = [(i, op) for i, op in enumerate(ops) if not _by_suffix(op)]
        if plain:
            answers = self.base.batch([self._inward(op) for _, op in plain])
            for (i, op), answer in zip(plain, answers, strict=True):
                out[i] = self._outward(op, answer)
        for i, op in enumerate(ops):
            if isinstance(op, ListNamespacesOp) and _by_suffix(op):
                out[i] = self._list_by_suffix(op)
        return out

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread (the SQLite store has no async API)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    # --- in and out -------------------------------------------------------------------------------
    def _inward(self, op: Op) -> Op:
        if isinstance(op, GetOp | PutOp):
            return op._replace(namespace=self.scope + tuple(op.namespace))
        if isinstance(op, SearchOp):
            return op._replace(namespace_prefix=self.scope + tuple(op.namespace_prefix))
        if isinstance(op, ListNamespacesOp):
            depth = op.max_depth
            if depth is not None:
                depth = depth + len(self.scope) if depth + len(self.scope) <= _MAX_DEPTH else None
            return op._replace(match_conditions=self._conditions(op.match_conditions), max_depth=depth)
        raise TypeError(f"unknown store op {type(op).__name__}")

    def _conditions(self, conditions: tuple[MatchCondition, ...] | None) -> tuple[MatchCondition, ...]:
        """The op's conditions with the tenant's labels before each prefix (a prefix of them alone if none)."""
        given = tuple(conditions or ())
        scoped = tuple(c._replace(path=self.scope + tuple(c.path)) if c.match_type == "prefix" else c for c in given)
        if not any(c.match_type == "prefix" for c in given):
            scoped = (MatchCondition(match_type="prefix", path=self.scope), *scoped)
        return scoped

    def _outward(self, op: Op, answer: Result) -> Result:
        if isinstance(op, GetOp):
            return self._item(answer) if isinstance(answer, Item) else None
        if isinstance(op, SearchOp):
            return [i for i in (self._item(item) for item in cast("list[Item]", answer or [])) if i is not None]
        if isinstance(op, ListNamespacesOp):
            return [ns for ns in (self._strip(tuple(ns)) for ns in cast("list[tuple[str, ...]]", answer or [])) if ns]
        return answer

    def _strip(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        """The tenant's namespace of a stored one (empty if it is not the tenant's: never answered)."""
        n = len(self.scope)
        return namespace[n:] if namespace[:n] == self.scope else ()

    def _item(self, item: Item) -> Item | None:
        namespace = self._strip(tuple(item.namespace))
        if not namespace:
            return None
        if isinstance(item, SearchItem):
            return SearchItem(namespace, item.key, item.value, item.created_at, item.updated_at, item.score)
        return Item(
            namespace=namespace, key=item.key, value=item.value, created_at=item.created_at, updated_at=item.updated_at
        )

    def _list_by_suffix(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """A listing with suffixes: every match (untruncated), less those whose suffix matched the
        tenant's own labels, then cut to `max_depth`, ordered as the stores order, and paged."""
        suffixes = [tuple(c.path) for c in op.match_conditions or () if c.match_type == "suffix"]
        every = op._replace(
            match_conditions=self._conditions(op.match_conditions), max_depth=None, limit=_ALL, offset=0
        )
        listed = cast("list[tuple[str, ...]]", self.base.batch([every])[0] or [])
        found = [self._strip(tuple(ns)) for ns in listed]
        fitting = {ns[: op.max_depth] for ns in found if ns and all(len(ns) >= len(s) for s in suffixes)}
        ordered = sorted(fitting, key=".".join)
        return ordered[op.offset : op.offset + op.limit]


def _by_suffix(op: Op) -> bool:
    return isinstance(op, ListNamespacesOp) and any(
        c.match_type == "suffix" and c.path for c in op.match_conditions or ()
    )


class LazyStore(BaseStore):
    """A store opened by `opener` on its first op (then shared): a run that never uses it opens nothing."""

    supports_ttl = True

    def __init__(self, opener: Callable[[], BaseStore], ttl_config: TTLConfig | None = None) -> None:
        self._opener = opener
        self._store: BaseStore | None = None
        self._lock = threading.Lock()
        self.ttl_config = ttl_config

    @property
    def store(self) -> BaseStore:
        """The store, opened now if this is its first use."""
        with self._lock:
            if self._store is None:
                self._store = self._opener()
            return self._store

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The opened store's batch."""
        return self.store.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))
