"""Runs on a thread and stateless runs: create, stream, wait, join, cancel, list, get.

A run with `input` is a new agentrt turn; a run with `command={"resume": ...}` answers the pending
approval; a run with neither continues the thread's unfinished run (after a crash or a cancel),
exactly as `agentrt resume` does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.errors import AgentRuntimeError, ConfigError, SessionNotFound, quote_id
from agent.serve.auth import Principal
from agent.serve.bodies import MAX_LIMIT, RunCreate, RunsCancel, RunStatusName, StreamMode
from agent.serve.context import ServeContext
from agent.serve.deps import get_ctx, get_principal
from agent.serve.encode import INTERRUPT_KEY
from agent.serve.engine import RunRecord, RunStatus
from agent.serve.run_log import logged_runs
from agent.serve.run_requests import check_request, make_job, make_record
from agent.serve.stream_log import Replay, StreamLog, parse_event_id
from agent.serve.streams import SUPPORTED_MODES, normalize_modes, sse, wanted
from agent.serve.thread_ops import delete_thread
from agent.session.session import ChatSession

router = APIRouter(tags=["runs"])
HEARTBEAT_S = 15.0
_tasks: set[asyncio.Task[None]] = set()


def _background(coro: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    _tasks.add(task)  # keep a reference until it is done
    task.add_done_callback(_tasks.discard)


# --- starting ------------------------------------------------------------------------------------------
async def _start(
    ctx: ServeContext, principal: Principal, thread_id: str | None, body: dict[str, Any], streaming: bool = False
) -> RunRecord:
    ctx.check_assistant(str(body.get("assistant_id") or ""))
    check_request(body)  # before any session is made: a refused run leaves no thread behind
    created = None
    if thread_id is None:
        created = await run_in_threadpool(ctx.create_session, principal, None, body.get("metadata"))
        thread_id = created.session_id
    else:
        try:
            await run_in_threadpool(ctx.session, principal, thread_id)
        except SessionNotFound:
            if body.get("if_not_exists") != "create":
                raise
            created = await run_in_threadpool(ctx.create_session, principal, thread_id, body.get("metadata"))
    rec = make_record(body, thread_id, principal, streaming)
    try:
        return await ctx.engine.start(principal, rec, make_job(ctx, principal, thread_id, body, rec))
    except BaseException:
        if created is not None:
            await run_in_threadpool(_drop, ctx, created)
        raise


def _drop(ctx: ServeContext, session: ChatSession) -> None:
    """Remove a session made for a run that did not start (kept if this saver cannot delete: the
    run's own error is the one to report)."""
    with contextlib.suppress(AgentRuntimeError):
        delete_thread(ctx, session)


def _location(rec: RunRecord, stateless: bool) -> dict[str, str]:
    path = f"/runs/{rec.run_id}" if stateless else f"/threads/{rec.thread_id}/runs/{rec.run_id}"
    return {"Content-Location": path}


async def _after(ctx: ServeContext, rec: RunRecord, body: dict[str, Any], stateless: bool) -> None:
    """Stateless runs asked to `on_completion: delete` drop their session once the run succeeded."""
    if stateless and body.get("on_completion") == "delete":
        await rec.wait()
        if rec.status is RunStatus.SUCCESS:
            session = await run_in_threadpool(ctx.runner.manager.get, rec.tenant_id, rec.thread_id)
            await run_in_threadpool(delete_thread, ctx, session)


def _final_values(rec: RunRecord) -> dict[str, Any]:
    if rec.error is not None and rec.status is RunStatus.ERROR:
        return {"__error__": rec.error}
    values = dict(rec.final_values)
    if rec.interrupts:
        values[INTERRUPT_KEY] = rec.interrupts
    return values


async def _sse(
    rec: RunRecord, modes: frozenset[str], after: int = 0, cancel_on_disconnect: bool = False
) -> AsyncIterator[bytes]:
    finished = False
    try:
        async for item in rec.follow_streamed(after, HEARTBEAT_S):
            if item is None:
                yield b": heartbeat\n\n"
                continue
            event_id, name, data = item
            if wanted(name, modes):
                yield sse(name, data, str(event_id))
        finished = True
    finally:
        if not finished and cancel_on_disconnect:
            rec.cancel_requested.set()


async def _replayed(replay: Replay, modes: frozenset[str]) -> AsyncIterator[bytes]:
    for event_id, name, data in replay.events:
        if wanted(name, modes):
            yield sse(name, data, str(event_id))


def _headers(location: dict[str, str]) -> dict[str, str]:
    return {**location, "Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def _stream_response(
    rec: RunRecord, modes: frozenset[str], stateless: bool, cancel: bool, after: int = 0
) -> StreamingResponse:
    return StreamingResponse(
        _sse(rec, modes, after, cancel), media_type="text/event-stream", headers=_headers(_location(rec, stateless))
    )


# --- the three ways to start, on a thread or (thread_id None) on a new one ------------------------------
async def _create(ctx: ServeContext, principal: Principal, thread_id: str | None, body: dict[str, Any]) -> JSONResponse:
    rec = await _start(ctx, principal, thread_id, body)
    stateless = thread_id is None
    if stateless:
        _background(_after(ctx, rec, body, stateless))
    return JSONResponse(rec.to_json(), headers=_location(rec, stateless))


async def _stream(
    ctx: ServeContext, principal: Principal, thread_id: str | None, body: dict[str, Any]
) -> StreamingResponse:
    rec = await _start(ctx, principal, thread_id, body, streaming=True)
    stateless = thread_id is None
    if stateless:
        _background(_after(ctx, rec, body, stateless))
    cancel = body.get("on_disconnect") == "cancel"
    return _stream_response(rec, normalize_modes(body.get("stream_mode")), stateless, cancel)


async def _wait(ctx: ServeContext, principal: Principal, thread_id: str | None, body: dict[str, Any]) -> JSONResponse:
    rec = await _start(ctx, principal, thread_id, body)
    await rec.wait()
    values = _final_values(rec)
    await _after(ctx, rec, body, thread_id is None)
    return JSONResponse(values, headers=_location(rec, thread_id is None))


# --- on a thread --------------------------------------------------------------------------------------
@router.post("/threads/{thread_id}/runs")
async def create_run(
    thread_id: str,
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """Start a run in the background; returns the Run."""
    return await _create(ctx, principal, thread_id, request.given())


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(
    thread_id: str,
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """Start a run and stream its events (server-sent events in the requested `stream_mode`s)."""
    return await _stream(ctx, principal, thread_id, request.given())


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(
    thread_id: str,
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """Run to the end (or to the pending approval) and return the thread's values."""
    return await _wait(ctx, principal, thread_id, request.given())


@router.get("/threads/{thread_id}/runs")
def list_runs(
    thread_id: str,
    limit: int = Query(default=10, ge=1, le=MAX_LIMIT),
    offset: int = Query(default=0, ge=0),
    status: RunStatusName | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> list[dict[str, Any]]:
    """The thread's runs, newest first: live ones from this process, the rest from the event log."""
    session = ctx.session(principal, thread_id)
    runs = _runs_of(ctx, session.tenant_id, session.session_id)
    if status:
        runs = [r for r in runs if r["status"] == status]
    return runs[offset : offset + limit]


def _runs_of(ctx: ServeContext, tenant_id: str, thread_id: str) -> list[dict[str, Any]]:
    live = {r.run_id: r.to_json() for r in ctx.engine.for_thread(tenant_id, thread_id)}
    session = ctx.runner.manager.get(tenant_id, thread_id)
    logged = logged_runs(ctx.runner.manager.jsonl.event_log(tenant_id, thread_id), session)
    out = [live.pop(r["run_id"], r) for r in logged]
    out.extend(live.values())
    out.sort(key=lambda r: str(r["created_at"]), reverse=True)
    return out


def _run_or_404(ctx: ServeContext, principal: Principal, thread_id: str, run_id: str) -> RunRecord | None:
    ctx.session(principal, thread_id)
    rec = ctx.engine.get(principal.tenant_id, run_id)
    return rec if rec is not None and rec.thread_id == thread_id else None


@router.get("/threads/{thread_id}/runs/{run_id}")
def get_run(
    thread_id: str,
    run_id: str,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """One run of the thread."""
    rec = _run_or_404(ctx, principal, thread_id, run_id)
    if rec is not None:
        return rec.to_json()
    for run in _runs_of(ctx, principal.tenant_id, thread_id):
        if run["run_id"] == run_id:
            return run
    raise SessionNotFound(f"run {quote_id(run_id)} not found in thread {quote_id(thread_id)}")


@router.post("/threads/{thread_id}/runs/{run_id}/cancel")
async def cancel_run(
    thread_id: str,
    run_id: str,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """Stop the run after its current step; its last checkpoint stays, so a run without input continues it.

    `action=rollback` is treated as `interrupt`: agentrt never deletes a run's checkpoints.
    """
    rec = await run_in_threadpool(_run_or_404, ctx, principal, thread_id, run_id)
    if rec is None:
        get_run(thread_id, run_id, ctx, principal)  # 404 unless the run exists (then it is not live here)
        return Response(status_code=204)
    rec.cancel_requested.set()
    if wait:
        await rec.wait()
    return Response(status_code=204)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(
    thread_id: str,
    run_id: str,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """Wait for the run to end; the thread's values."""
    rec = await run_in_threadpool(_run_or_404, ctx, principal, thread_id, run_id)
    if rec is None:
        await run_in_threadpool(get_run, thread_id, run_id, ctx, principal)
        session = await run_in_threadpool(ctx.session, principal, thread_id)
        state = await run_in_threadpool(ctx.state, session)
        return dict(state["values"])
    await rec.wait()
    return _final_values(rec)


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
    here is followed; a finished one (also from before a restart) is replayed from the record store
    while its events are kept (`serve.stream_ttl_s`)."""
    after = parse_event_id(last_event_id)
    asked = [m for m in stream_mode or () if m]  # the SDK sends `stream_mode=` when it names none
    rec = await run_in_threadpool(_run_or_404, ctx, principal, thread_id, run_id)
    if rec is not None and not rec.trimmed:
        modes = normalize_modes(asked) if asked else rec.modes
        return _stream_response(rec, modes, False, cancel_on_disconnect, after)
    kept = StreamLog(ctx.settings, principal.tenant_id, thread_id, run_id)
    replay = await run_in_threadpool(kept.read, after)
    if replay is None:
        raise SessionNotFound(f"run {quote_id(run_id)} has no stream kept in thread {quote_id(thread_id)}")
    modes = normalize_modes(asked) if asked else SUPPORTED_MODES
    location = {"Content-Location": f"/threads/{thread_id}/runs/{run_id}"}
    return StreamingResponse(_replayed(replay, modes), media_type="text/event-stream", headers=_headers(location))


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
def delete_run(thread_id: str, run_id: str, _: Principal = Depends(get_principal)) -> Response:
    """Runs are part of the session's history and are never deleted one by one."""
    raise ConfigError("agentrt keeps every run in the session's history; delete the thread to remove it")


# --- stateless ------------------------------------------------------------------------------------------
@router.post("/runs")
async def create_stateless(
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """A run on a new thread (kept unless `on_completion: delete`)."""
    return await _create(ctx, principal, None, request.given())


@router.post("/runs/stream")
async def stream_stateless(
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """`/threads/{id}/runs/stream` on a new thread."""
    return await _stream(ctx, principal, None, request.given())


@router.post("/runs/wait")
async def wait_stateless(
    request: RunCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """`/threads/{id}/runs/wait` on a new thread."""
    return await _wait(ctx, principal, None, request.given())


@router.post("/runs/cancel", status_code=204)
def cancel_many(
    request: RunsCancel | None = None,
    action: Literal["interrupt", "rollback"] = "interrupt",
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """Cancel the caller's live runs by `thread_id` and/or `run_ids` (or `status`: running / all)."""
    body = request.given() if request else {}
    ids = set(body.get("run_ids") or [])
    thread = body.get("thread_id")
    for rec in ctx.engine.live(principal.tenant_id):
        if (ids and rec.run_id not in ids) or (thread and rec.thread_id != thread):
            continue
        if ids or thread or body.get("status") in ("running", "all", "pending"):
            rec.cancel_requested.set()
    return Response(status_code=204)
