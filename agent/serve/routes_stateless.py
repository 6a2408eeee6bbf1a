"""Stateless runs (`POST /runs`, `/runs/stream`, `/runs/wait`: each on a new thread, deleted when the
run is over unless `on_completion: "keep"`) and `POST /runs/cancel`."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.core.errors import SessionNotFound
from agent.serve.auth import Principal
from agent.serve.bodies import RunCreate, RunsCancel
from agent.serve.deps import get_ctx, get_principal
from agent.serve.remote_runs import IN_FLIGHT
from agent.serve.routes_runs import create, stream, wait
from agent.serve.run_record import CancelAction
from agent.serve.run_service import runs_of
from agent.serve.run_table import RunTable
from agent.serve.serve_context import ServeContext

router = APIRouter(tags=["runs"])


@router.post("/runs")
async def create_stateless(
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """A run on a new thread, deleted when the run is over (unless `on_completion: keep`)."""
    return await create(ctx, principal, None, request.given())


@router.post("/runs/stream")
async def stream_stateless(
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """`/threads/{id}/runs/stream` on a new thread."""
    return await stream(ctx, principal, None, request.given())


@router.post("/runs/wait")
async def wait_stateless(
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """`/threads/{id}/runs/wait` on a new thread."""
    return await wait(ctx, principal, None, request.given())


@router.post("/runs/cancel", status_code=204)
async def cancel_many(
    request: RunsCancel | None = None,
    action: Literal["interrupt", "rollback"] = "interrupt",
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """Cancel the caller's runs in flight by `thread_id` and/or `run_ids`, or by `status` (pending,
    running, all); with `thread_id`, the thread's runs another server over the store holds too (that
    server cancels them at its next check: agent/serve/run_watch.py)."""
    body = request.given() if request else {}
    ids = set(body.get("run_ids") or [])
    thread = body.get("thread_id")
    status = body.get("status")
    for rec in ctx.engine.live(principal.tenant_id):
        if (ids and rec.run_id not in ids) or (thread and rec.thread_id != thread):
            continue
        if not (ids or thread) and (status is None or status not in ("all", rec.status.value)):
            continue  # by status alone: only runs of that status (nothing named: nothing cancelled)
        await run_in_threadpool(ctx.engine.cancel, rec, CancelAction(action))
    if thread:  # the thread's runs another server holds: that server cancels them at its next check
        await run_in_threadpool(_mark_elsewhere, ctx, principal, str(thread), ids, action)
    return Response(status_code=204)


def _mark_elsewhere(ctx: ServeContext, principal: Principal, thread_id: str, ids: set[str], action: str) -> None:
    try:
        runs = runs_of(ctx, principal.tenant_id, ctx.session(principal, thread_id).session_id)
    except SessionNotFound:
        return
    table = RunTable(ctx.settings, principal.tenant_id, thread_id)
    for run in runs:
        here = ctx.engine.get(principal.tenant_id, str(run["run_id"])) is not None
        if run["status"] in IN_FLIGHT and not here and (not ids or run["run_id"] in ids):
            table.cancel(str(run["run_id"]), action)
