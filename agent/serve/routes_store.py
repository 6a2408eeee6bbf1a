"""The store API (`client.store` of `langgraph_sdk`): items in namespaces, kept across threads, in
LangGraph's own store (`agent.session.item_store`) seen through the caller's tenant
(`agent.session.tenant_store`): every namespace is the tenant's, inside and out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Query, Response
from langgraph.store.base import BaseStore

from agent.core.errors import BackendUnavailable, ConfigError, is_store_db_error
from agent.serve.auth import Principal
from agent.serve.deps import get_ctx, get_principal
from agent.serve.serve_context import ServeContext
from agent.serve.store_bodies import StoreDelete, StoreNamespaces, StorePut, StoreSearch, check_label
from agent.session.tenant_store import TenantStore

router = APIRouter(prefix="/store", tags=["store"])
T = TypeVar("T")


def _store(ctx: ServeContext, principal: Principal) -> BaseStore:
    return TenantStore(ctx.items, principal.tenant_id)


def _call(op: Callable[[], T]) -> T:
    """The store op; a failure of its database is a 503 (the request itself was checked before)."""
    try:
        return op()
    except Exception as err:
        if not is_store_db_error(err):
            raise
        raise BackendUnavailable(
            f"LangGraph's store failed ({type(err).__name__}: {err}); check that its database is reachable, then retry"
        ) from err


@router.put("/items", status_code=204)
def put_item(
    request: StorePut, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> Response:
    """Store or replace the item `key` in `namespace` (`ttl` minutes: it expires after that long unread)."""
    store = _store(ctx, principal)
    namespace = tuple(request.namespace)
    _call(lambda: store.put(namespace, request.key, request.value, index=request.index, ttl=request.ttl))
    return Response(status_code=204)


@router.get("/items")
def get_item(
    key: str = Query(min_length=1),
    namespace: str = Query(default="", description="The labels joined with '.', as langgraph_sdk sends them."),
    refresh_ttl: bool | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any] | None:
    """The item, or null when there is none (or it expired)."""
    labels = _dotted(namespace)
    if "\x00" in key:
        raise ConfigError("key: contains a NUL character, which the stores cannot keep")
    store = _store(ctx, principal)
    item = _call(lambda: store.get(labels, key, refresh_ttl=refresh_ttl))
    return item.dict() if item is not None else None


@router.delete("/items", status_code=204)
def delete_item(
    request: StoreDelete, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> Response:
    """Delete the item (nothing to delete is no error)."""
    store = _store(ctx, principal)
    _call(lambda: store.delete(tuple(request.namespace), request.key))
    return Response(status_code=204)


@router.post("/items/search")
def search_items(
    request: StoreSearch, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """Items under `namespace_prefix` (all of the tenant's without one), newest update first,
    matching `filter` (`{"field": value}` or `{"field": {"$gt": value}}`), paged by `limit` / `offset`."""
    store = _store(ctx, principal)
    items = _call(
        lambda: store.search(
            tuple(request.namespace_prefix or ()),
            query=request.query,
            filter=request.filter,
            limit=request.limit,
            offset=request.offset,
            refresh_ttl=request.refresh_ttl,
        )
    )
    return {"items": [item.dict() for item in items]}


@router.post("/namespaces")
def list_namespaces(
    request: StoreNamespaces | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """The tenant's namespaces starting with `prefix` and ending with `suffix` (`*` matches any one
    label), cut to `max_depth` labels, sorted, paged by `limit` / `offset`."""
    body = request or StoreNamespaces()
    store = _store(ctx, principal)
    found = _call(
        lambda: store.list_namespaces(
            prefix=tuple(body.prefix) if body.prefix else None,
            suffix=tuple(body.suffix) if body.suffix else None,
            max_depth=body.max_depth,
            limit=body.limit,
            offset=body.offset,
        )
    )
    return {"namespaces": [list(ns) for ns in found]}


def _dotted(namespace: str) -> tuple[str, ...]:
    """The namespace of a GET (its labels joined with '.'): every label checked, at least one."""
    if not namespace:
        raise ConfigError("namespace: give at least one label (labels joined with '.')")
    try:
        return tuple(check_label(label) for label in namespace.split("."))
    except ValueError as err:
        raise ConfigError(f"namespace: {err}") from None
