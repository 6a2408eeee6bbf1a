"""Runs on a thread: create, stream, wait, join, join-stream, cancel, list, get.

A run with `input` is a new agentrt turn; a run with `command={"resume": ...}` answers the pending
approval; a run with neither continues the thread's unfinished run (after a crash, a cancel or a
breakpoint), exactly as `agentrt resume` does. Each is a run of its own (its own id, listed beside
the run it continues). What a run does when the thread has runs in flight is its
`multitask_strategy` (agent/serve/engine.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError, SessionNotFound, quote_id
from agent.serve.auth import Principal
from agent.serve.bodies import MAX_LIMIT, RunCreate, RunStatusName, StreamMode
from agent.serve.deps import get_ctx, get_principal
from agent.serve.remote_runs import IN_FLIGHT, REMOTE_POLL_S, remote_row, shadow
from agent.serve.run_record import CancelAction
from agent.serve.run_service import (
    final_values,
    followed_elsewhere,
    listed_run,
    live_run,
    location,
    replayed,
    runs_of,
    start,
    stream_headers,
    stream_response,
)
from agent.serve.run_table import RunTable
from agent.serve.serve_context import ServeContext
from agent.serve.stream_log import StreamLog, parse_event_id
from agent.serve.streams import SUPPORTED_MODES, normalize_modes
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id

REMOTE_WAIT_S = 60.0
"""How long a cancel with `wait` of a run another server holds waits for it to end."""
router = APIRouter(tags=["runs"])


# --- the three ways to start, on a thread or (thread_id None) on a new one ------------------------------
async def create(ctx: ServeContext, principal: Principal, thread_id: str | None, body: dict[str, Any]) -> JSONResponse:
    """Start a run in the background; the Run (pending when it waits for its turn)."""
    rec = await start(ctx, principal, thread_id, body)
    return JSONResponse(rec.to_json(), headers=location(rec, thread_id is None))


async def stream(
    ctx: ServeContext, principal: Principal, thread_id: str | None, body: dict[str, Any]
) -> StreamingResponse:
    """Start a run and stream its events."""
    rec = await start(ctx, principal, thread_id, body, streaming=True)
    cancel = body.get("on_disconnect") == "cancel"
    return stream_response(ctx, rec, normalize_modes(body.get("stream_mode")), thread_id is None, cancel)


async def wait(ctx: ServeContext, principal: Principal, thread_id: str | None, body: dict[str, Any]) -> JSONResponse:
    """Start a run and answer, once it is over, the thread's values."""
    rec = await start(ctx, principal, thread_id, body)
    await rec.wait()
    return JSONResponse(final_values(rec), headers=location(rec, thread_id is None))


@router.post("/threads/{thread_id}/runs")
async def create_run(
    thread_id: str,
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """Start a run in the background; returns the Run."""
    return await create(ctx, principal, thread_id, request.given())


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(
    thread_id: str,
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """Start a run and stream its events (server-sent events in the requested `stream_mode`s)."""
    return await stream(ctx, principal, thread_id, request.given())


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(
    thread_id: str,
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """Run to the end (or to the pending approval) and return the thread's values."""
    return await wait(ctx, principal, thread_id, request.given())


@router.get("/threads/{thread_id}/runs")
def list_runs(
    thread_id: str,
    limit: int = Query(default=10, ge=1, le=MAX_LIMIT),
    offset: int = Query(default=0, ge=0),
    status: RunStatusName | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> list[dict[str, Any]]:
    """The thread's runs, newest first: those this process holds, the rest from the run table and
    the event log."""
    session = ctx.session(principal, thread_id)
    runs = runs_of(ctx, session.tenant_id, session.session_id)
    if status:
        runs = [r for r in runs if r["status"] == status]
    return runs[offset : offset + limit]


@router.get("/threads/{thread_id}/runs/{run_id}")
def get_run(
    thread_id: str,
    run_id: str,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """One run of the thread."""
    return listed_run(ctx, principal, thread_id, run_id)


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202)
async def cancel_run(
    thread_id: str,
    run_id: str,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """Cancel the run: a pending one never starts; a running one stops after its current step, its
    last checkpoint kept (a run without input continues it), or with `action=rollback` its writes
    are rolled back and the run is deleted. With `wait`, answers the run's final values. A run
    another server over the same store holds is cancelled by that server, at its next check
    (agent/serve/run_watch.py)."""
    rec = await run_in_threadpool(live_run, ctx, principal, thread_id, run_id)
    if rec is None:
        run = await run_in_threadpool(listed_run, ctx, principal, thread_id, run_id)  # 404 unless it exists
        if run["status"] in IN_FLIGHT:  # held by another server
            await run_in_threadpool(RunTable(ctx.settings, principal.tenant_id, thread_id).cancel, run_id, action)
            if wait:
                return JSONResponse(await settled_elsewhere(ctx, principal, thread_id, run_id))
        return Response(status_code=202)
    await run_in_threadpool(ctx.engine.cancel, rec, CancelAction(action))
    if not wait:
        return Response(status_code=202)
    await rec.wait()
    return JSONResponse(final_values(rec))


async def settled_elsewhere(ctx: ServeContext, principal: Principal, thread_id: str, run_id: str) -> dict[str, Any]:
    """Once the run another server holds is over (or `REMOTE_WAIT_S` passed), the thread's values."""
    deadline = asyncio.get_running_loop().time() + REMOTE_WAIT_S
    while asyncio.get_running_loop().time() < deadline:
        run = await run_in_threadpool(listed_run, ctx, principal, thread_id, run_id)
        if run["status"] not in IN_FLIGHT:
            break
        await asyncio.sleep(REMOTE_POLL_S)
    session = await run_in_threadpool(ctx.session, principal, thread_id)
    return dict((await run_in_threadpool(ctx.state, session))["values"])


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(
    thread_id: str,
    run_id: str,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """Wait for the run to end; the thread's values."""
    rec = await run_in_threadpool(live_run, ctx, principal, thread_id, run_id)
    if rec is None:
        await run_in_threadpool(listed_run, ctx, principal, thread_id, run_id)
        session = await run_in_threadpool(ctx.session, principal, thread_id)
        state = await run_in_threadpool(ctx.state, session)
        return dict(state["values"])
    await rec.wait()
    return final_values(rec)


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_stream(
    thread_id: str,
    run_id: str,
    stream_mode: list[StreamMode | Literal[""]] | None = Query(default=None),
    cancel_on_disconnect: bool = False,
    last_event_id: str | None = Header(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """Stream a run's events after `Last-Event-ID` (all of them without it) to its end: a run live
    here is followed; one another server over the same store runs is read from the store as that
    server appends its events; a finished one (also from before a restart, or run by another
    server) is replayed from the record store while its events are kept (`serve.stream_ttl_s`)."""
    after = parse_event_id(last_event_id)
    asked = [m for m in stream_mode or () if m]  # the SDK sends `stream_mode=` when it names none
    rec = await run_in_threadpool(live_run, ctx, principal, thread_id, run_id)
    if rec is not None and not rec.trimmed:
        modes = normalize_modes(asked) if asked else rec.modes
        return stream_response(ctx, rec, modes, False, cancel_on_disconnect, after)
    try:
        validate_id(run_id, "run id")
    except InvalidIdError:
        raise SessionNotFound(f"run {quote_id(run_id)} not found in thread {quote_id(thread_id)}") from None
    await run_in_threadpool(listed_run, ctx, principal, thread_id, run_id)
    modes = normalize_modes(asked) if asked else SUPPORTED_MODES
    location = {"Content-Location": f"/threads/{thread_id}/runs/{run_id}"}
    row = await run_in_threadpool(remote_row, ctx.settings, principal.tenant_id, thread_id, run_id)
    if row is not None:  # another server runs it: its events are followed in the store
        events = followed_elsewhere(ctx, shadow(row, principal.tenant_id), modes, after, cancel_on_disconnect)
        return StreamingResponse(events, media_type="text/event-stream", headers=stream_headers(location))
    kept = StreamLog(ctx.settings, principal.tenant_id, thread_id, run_id)
    replay = await run_in_threadpool(kept.read, after)
    if replay is None:
        raise SessionNotFound(f"run {quote_id(run_id)} has no stream kept in thread {quote_id(thread_id)}")
    return StreamingResponse(replayed(replay, modes), media_type="text/event-stream", headers=stream_headers(location))


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
def delete_run(thread_id: str, run_id: str, _: Principal = Depends(get_principal)) -> Response:
    """Runs are part of the session's history and are never deleted one by one."""
    raise ConfigError("agentrt keeps every run in the session's history; delete the thread to remove it")
