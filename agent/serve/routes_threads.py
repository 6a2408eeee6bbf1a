"""Threads = agentrt sessions of the caller: create, get, search, count, delete, copy, state, history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Response

from agent.errors import ConfigError, SessionNotFound
from agent.serve.auth import Principal
from agent.serve.context import METADATA_KEY, ServeContext
from agent.serve.deps import get_ctx, get_principal
from agent.serve.encode import json_response
from agent.serve.search import SORT_KEYS, search_filters
from agent.serve.thread_ops import copy_thread, delete_thread

router = APIRouter(prefix="/threads", tags=["threads"])


@router.post("")
def create_thread(
    body: dict[str, Any] | None = Body(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """A new session (`thread_id` optional; `if_exists`: raise | do_nothing)."""
    body = body or {}
    tid = body.get("thread_id")
    if tid:
        try:
            existing = ctx.session(principal, str(tid))
        except SessionNotFound:
            existing = None
        if existing is not None:
            if body.get("if_exists") == "do_nothing":
                return ctx.thread(existing)
            raise ConfigError(f"thread {tid} already exists; use if_exists='do_nothing' or another id")
    session = ctx.create_session(principal, str(tid) if tid else None, body.get("metadata"))
    return ctx.thread(session, with_values=False)


@router.post("/search")
def search_threads(
    body: dict[str, Any] | None = Body(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """The caller's sessions, newest first, filtered by `metadata`, `status` and `ids`."""
    return json_response(_search(body or {}, ctx, principal))


def _search(body: dict[str, Any], ctx: ServeContext, principal: Principal, count_only: bool = False) -> Any:
    """One indexed query (filters, order, offset/limit): no session document is read."""
    where = search_filters(body, ctx, principal)
    if where is None:
        return 0 if count_only else []
    manager = ctx.runner.manager
    if count_only:
        return manager.search(principal.tenant_id, where, count_only=True)
    key = body.get("sort_by") or "updated_at"
    order = SORT_KEYS.get(str(key), "activity")
    rows = manager.search(
        principal.tenant_id,
        where,
        order=order,
        descending=(body.get("sort_order") or "desc") == "desc",
        limit=max(0, int(body.get("limit") or 10)),
        offset=max(0, int(body.get("offset") or 0)),
    )
    assert isinstance(rows, list)
    return [ctx.thread_of_row(r) for r in rows]


@router.post("/count")
def count_threads(
    body: dict[str, Any] | None = Body(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> int:
    """How many of the caller's threads match."""
    return int(_search(body or {}, ctx, principal, count_only=True))


@router.get("/{thread_id}")
def get_thread(
    thread_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> Response:
    """One thread with its current values."""
    return json_response(ctx.thread(ctx.session(principal, thread_id)))


@router.delete("/{thread_id}", status_code=204)
def remove_thread(
    thread_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> Response:
    """Delete the session for good (refused while a run holds it)."""
    delete_thread(ctx, ctx.session(principal, thread_id))
    return Response(status_code=204)


@router.post("/{thread_id}/copy")
def copy(
    thread_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """A new thread with a copy of this one's checkpoints."""
    new = copy_thread(ctx, principal, ctx.session(principal, thread_id))
    return ctx.thread(new)


@router.patch("/{thread_id}")
def update_thread(
    thread_id: str,
    body: dict[str, Any] | None = Body(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """Merge `metadata` into the thread's metadata (not while a run is going)."""
    session = ctx.session(principal, thread_id)
    if ctx.engine.active(session.tenant_id, session.session_id) is not None:
        raise ConfigError(f"thread {thread_id} has a run going; update its metadata when the run is over")
    meta = {**(session.context.get(METADATA_KEY) or {}), **((body or {}).get("metadata") or {})}
    session.context = {**session.context, METADATA_KEY: meta}
    ctx.runner.manager.save(session)
    return ctx.thread(session)


@router.get("/{thread_id}/state")
def get_state(
    thread_id: str,
    subgraphs: bool = False,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """The session's state at the head of its current branch."""
    return json_response(ctx.state(ctx.session(principal, thread_id)))


@router.get("/{thread_id}/state/{checkpoint_id}")
def get_state_at(
    thread_id: str,
    checkpoint_id: str,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """The session's state at one checkpoint."""
    return json_response(ctx.state(ctx.session(principal, thread_id), checkpoint_id))


@router.post("/{thread_id}/state/checkpoint")
def post_state_at(
    thread_id: str,
    body: dict[str, Any] | None = Body(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """`{"checkpoint": {"checkpoint_id": ...}}`: the state at that checkpoint."""
    cp = ((body or {}).get("checkpoint") or {}).get("checkpoint_id")
    return json_response(ctx.state(ctx.session(principal, thread_id), cp))


@router.post("/{thread_id}/state")
def update_state(thread_id: str, _: Principal = Depends(get_principal)) -> dict[str, Any]:
    """Editing state from outside a run is not offered: it would bypass the lease and the event log."""
    raise ConfigError(
        "updating a thread's state directly is not supported by agentrt serve; "
        "fork from an entry (page or `agentrt fork`) and run a turn instead"
    )


@router.post("/{thread_id}/history")
def post_history(
    thread_id: str,
    body: dict[str, Any] | None = Body(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """States of the current branch, newest first (`limit`, `before`, `checkpoint`, `metadata`)."""
    body = body or {}
    before = body.get("before")
    if isinstance(before, dict):
        before = before.get("checkpoint_id") or (before.get("configurable") or {}).get("checkpoint_id")
    cp = (body.get("checkpoint") or {}).get("checkpoint_id")
    session = ctx.session(principal, thread_id)
    return json_response(ctx.history(session, int(body.get("limit") or 10), before, cp, body.get("metadata")))


@router.get("/{thread_id}/history")
def get_history(
    thread_id: str,
    limit: int = 10,
    before: str | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """`GET` form of the history."""
    return json_response(ctx.history(ctx.session(principal, thread_id), limit, before))
