"""Stateless runs (`POST /runs`, `/runs/stream`, `/runs/wait`: each on a new thread, deleted when the
run is over unless `on_completion: "keep"`) and `POST /runs/cancel`."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.serve.auth import Principal
from agent.serve.bodies import RunCreate, RunsCancel
from agent.serve.deps import get_ctx, get_principal
from agent.serve.routes_runs import create, stream, wait
from agent.serve.run_record import CancelAction
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
    running, all)."""
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
    return Response(status_code=204)
