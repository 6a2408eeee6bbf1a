"""Threads = agentrt sessions of the caller: create, get, search, count, delete, copy, state, history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Response

from agent.core.errors import ConfigError, SessionNotFound
from agent.serve.auth import Principal
from agent.serve.bodies import (
    MAX_LIMIT,
    History,
    StateCheckpoint,
    StateUpdate,
    ThreadCount,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
)
from agent.serve.deps import get_ctx, get_principal
from agent.serve.encode import json_response
from agent.serve.search import SORT_KEYS, search_filters
from agent.serve.serve_context import METADATA_KEY, ServeContext
from agent.serve.state_edit import edit_state
from agent.serve.thread_follow import announce_state
from agent.serve.thread_ops import copy_thread, remove_thread
from checkpointing.session_index import SessionRow

router = APIRouter(prefix="/threads", tags=["threads"])


@router.post("")
def create_thread(
    request: ThreadCreate | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """A new session (`thread_id` optional; `if_exists`: raise | do_nothing)."""
    body = request.given() if request else {}
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
    request: ThreadSearch | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """The caller's threads, newest first, filtered by `metadata`, `status` and `ids`, each with its
    values and interrupts (unless `select` leaves them out), as agent-chat-ui lists them."""
    body = request.given() if request else {}
    if body.get("values"):
        raise ConfigError("threads.search by state values is not supported by agentrt serve; filter by metadata")
    if body.get("extract"):
        raise ConfigError("threads.search extract is not supported by agentrt serve; read the values instead")
    rows = _search(body, ctx, principal)
    select = body.get("select")
    with_values = not select or bool({"values", "interrupts"} & set(select))
    threads = [_full(ctx, principal, row) if with_values else ctx.thread_of_row(row) for row in rows]
    if select:
        threads = [{k: t[k] for k in select if k in t} for t in threads]
    return json_response(threads)


def _full(ctx: ServeContext, principal: Principal, row: SessionRow) -> dict[str, Any]:
    """The thread with its values, read from its checkpoint alone (the row says where a fresh fork's
    state is); a row from before rows said so reads the session document."""
    if "fork_checkpoint_id" in row.meta:
        return ctx.thread_of_row(row, with_values=True)
    try:
        return ctx.thread(ctx.runner.manager.get(principal.tenant_id, row.session_id, principal.user_id))
    except SessionNotFound:
        return ctx.thread_of_row(row)


def _search(body: dict[str, Any], ctx: ServeContext, principal: Principal, count_only: bool = False) -> Any:
    """One indexed query (filters, order, offset/limit): the matching index rows, or their count."""
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
    return rows


@router.post("/count")
def count_threads(
    request: ThreadCount | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> int:
    """How many of the caller's threads match."""
    return int(_search(request.given() if request else {}, ctx, principal, count_only=True))


@router.get("/{thread_id}")
def get_thread(
    thread_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> Response:
    """One thread with its current values."""
    return json_response(ctx.thread(ctx.session(principal, thread_id)))


@router.delete("/{thread_id}", status_code=204)
async def delete_one_thread(
    thread_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> Response:
    """Delete the session for good, as LangGraph's server does: a run going on it here is cancelled
    first, its pending runs never start, its crons are deleted with it (409 while a run of another
    server holds it)."""
    await remove_thread(ctx, principal, thread_id)
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
    request: ThreadPatch | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """Merge `metadata` into the thread's metadata (not while a run is going)."""
    session = ctx.session(principal, thread_id)
    if ctx.engine.active(session.tenant_id, session.session_id) is not None:
        raise ConfigError(f"thread {thread_id} has a run going; update its metadata when the run is over")
    meta = {**(session.context.get(METADATA_KEY) or {}), **((request.metadata if request else None) or {})}
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
    request: StateCheckpoint,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """`{"checkpoint": {"checkpoint_id": ...}}`: the state at that checkpoint."""
    cp = request.checkpoint.checkpoint_id
    return json_response(ctx.state(ctx.session(principal, thread_id), cp))


@router.post("/{thread_id}/state")
def update_state(
    thread_id: str,
    request: StateUpdate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """Edit the state: a new branch forked at `checkpoint_id` (else the head) holds `values` as
    written by `as_node`; the original branch stays as it was (`agent.serve.state_edit`)."""
    if not isinstance(request.values, dict):
        raise ConfigError('values must be an object of state keys, e.g. {"messages": [...]}')
    session = ctx.session(principal, thread_id)
    cp = request.checkpoint_id or (request.checkpoint.checkpoint_id if request.checkpoint else None)
    edited = edit_state(ctx, session, request.values, request.as_node, cp)
    announce_state(ctx, principal, thread_id)
    return json_response(edited)


@router.post("/{thread_id}/history")
def post_history(
    thread_id: str,
    request: History | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """States of the current branch, newest first (`limit`, `before`, `checkpoint`, `metadata`)."""
    request = request or History()
    before = request.before
    if not isinstance(before, str):
        before = before.checkpoint_id if before is not None else None
    cp = request.checkpoint.checkpoint_id if request.checkpoint else None
    session = ctx.session(principal, thread_id)
    return json_response(ctx.history(session, request.limit, before, cp, request.metadata))


@router.get("/{thread_id}/history")
def get_history(
    thread_id: str,
    limit: int = Query(default=10, ge=1, le=MAX_LIMIT),
    before: str | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """`GET` form of the history."""
    return json_response(ctx.history(ctx.session(principal, thread_id), limit, before))
