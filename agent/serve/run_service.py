"""Starting an API run and answering with it: the request checked, the thread found (or made, for a
stateless run and `if_not_exists: "create"`), the run handed to the engine, its stream, its final
values, and the thread of a stateless run removed once the run is over.

A stateless run (`POST /runs`, `/runs/stream`, `/runs/wait`) runs on a new thread that is deleted
when the run ends, whatever its outcome, unless it asks `on_completion: "keep"` (LangGraph's
server does the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.core.errors import AgentrtError, LeaseHeld, SessionNotFound, quote_id
from agent.serve.auth import Principal
from agent.serve.encode import INTERRUPT_KEY
from agent.serve.remote_runs import follow_remote
from agent.serve.run_log import logged_runs, thread_runs
from agent.serve.run_record import ApiRunStatus, CancelAction, RunRecord
from agent.serve.run_requests import (
    check_request,
    make_job,
    make_record,
    remote_resume,
    start_point,
    strategy_of,
    with_assistant,
)
from agent.serve.run_table import RunTable
from agent.serve.serve_context import ServeContext
from agent.serve.stream_log import Replay
from agent.serve.streams import sse, wanted
from agent.serve.thread_ops import delete_thread
from agent.session.session import ChatSession

log = logging.getLogger("agentrt.serve")
HEARTBEAT_S = 15.0
_tasks: set[asyncio.Task[None]] = set()


LEASE_WAIT_S = 30.0
"""How long a stateless run's thread deletion waits for the finished turn to let go of the lease."""


def background(coro: Coroutine[Any, Any, None]) -> None:
    """Run `coro` on the event loop, kept referenced until it is done."""
    task = asyncio.get_running_loop().create_task(coro)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def start(
    ctx: ServeContext,
    principal: Principal,
    thread_id: str | None,
    body: dict[str, Any],
    streaming: bool = False,
    *,
    run_id: str | None = None,
    new_thread_id: str | None = None,
) -> RunRecord:
    """Check the request, find or make its thread, and hand the run to the engine (`thread_id` None:
    a stateless run, on a new thread, `new_thread_id` if given). A refused request leaves no thread
    behind. `run_id`: the run's id (default: a new one)."""
    stateless = thread_id is None
    body = await run_in_threadpool(with_assistant, ctx, principal, body)
    check_request(body, ctx, stateless)  # before any session is made
    created = None
    if thread_id is None:
        created = await run_in_threadpool(ctx.create_session, principal, new_thread_id, body.get("metadata"))
        thread_id = created.session_id
    else:
        try:
            await run_in_threadpool(ctx.session, principal, thread_id)
        except SessionNotFound:
            if body.get("if_not_exists") != "create":
                raise
            created = await run_in_threadpool(ctx.create_session, principal, thread_id, body.get("metadata"))
        if created is None:
            body = await run_in_threadpool(remote_resume, ctx, principal, thread_id, body)
            body = await run_in_threadpool(start_point, ctx, principal, thread_id, body)
    rec = make_record(body, thread_id, principal, streaming, run_id)
    try:
        rec = await ctx.engine.submit(rec, make_job(ctx, principal, thread_id, body, rec), strategy_of(body))
    except BaseException:
        if created is not None:
            await run_in_threadpool(_drop, ctx, created)
        raise
    if stateless and body.get("on_completion", "delete") == "delete":
        background(_remove_when_over(ctx, rec))
    return rec


def _drop(ctx: ServeContext, session: ChatSession) -> None:
    """Remove a session made for a run that did not start (kept if this saver cannot delete: the
    run's own error is the one to report)."""
    with contextlib.suppress(AgentrtError):
        delete_thread(ctx, session)


async def _remove_when_over(ctx: ServeContext, rec: RunRecord) -> None:
    await rec.wait()
    # The run's last event comes just before its turn lets go of the session's lease: a delete
    # refused for the lease in that moment is tried again.
    deadline = asyncio.get_running_loop().time() + LEASE_WAIT_S
    while True:
        try:
            session = await run_in_threadpool(ctx.runner.manager.get, rec.tenant_id, rec.thread_id)
            await run_in_threadpool(delete_thread, ctx, session)
            return
        except SessionNotFound:
            return
        except LeaseHeld as err:
            if asyncio.get_running_loop().time() > deadline:
                log.warning("could not delete the thread %s of stateless run %s: %s", rec.thread_id, rec.run_id, err)
                return
            await asyncio.sleep(0.1)
        except Exception as err:  # the run's answer is already given; the thread stays, listed
            log.warning("could not delete the thread %s of stateless run %s: %s", rec.thread_id, rec.run_id, err)
            return


def final_values(rec: RunRecord) -> dict[str, Any]:
    """What `runs.wait` and `runs.join` answer: the thread's values after the run (with the
    pending interrupts under `__interrupt__`), or `{"__error__": ...}` for a failed run."""
    if rec.error is not None and rec.status is ApiRunStatus.ERROR:
        return {"__error__": rec.error}
    values = dict(rec.final_values)
    if rec.interrupts:
        values[INTERRUPT_KEY] = rec.interrupts
    return values


# --- reading runs ----------------------------------------------------------------------------------------
def runs_of(ctx: ServeContext, tenant_id: str, thread_id: str) -> list[dict[str, Any]]:
    """The thread's runs, newest first (agent/serve/run_log.py)."""
    session = ctx.runner.manager.get(tenant_id, thread_id)
    parts = logged_runs(ctx.runner.manager.event_log(tenant_id, thread_id), session)
    table = RunTable(ctx.settings, tenant_id, thread_id).read()
    return thread_runs(parts, table, ctx.engine.for_thread(tenant_id, thread_id))


def live_run(ctx: ServeContext, principal: Principal, thread_id: str, run_id: str) -> RunRecord | None:
    """The run as this process holds it (the thread checked first: 404 when the caller cannot see it)."""
    ctx.session(principal, thread_id)
    rec = ctx.engine.get(principal.tenant_id, run_id)
    return rec if rec is not None and rec.thread_id == thread_id and not rec.deleted else None


def listed_run(ctx: ServeContext, principal: Principal, thread_id: str, run_id: str) -> dict[str, Any]:
    """One run of the thread as listed; `SessionNotFound` (404) when there is none (or it was rolled back)."""
    rec = live_run(ctx, principal, thread_id, run_id)
    if rec is not None:
        return rec.to_json()
    for run in runs_of(ctx, principal.tenant_id, thread_id):
        if run["run_id"] == run_id:
            return run
    raise SessionNotFound(f"run {quote_id(run_id)} not found in thread {quote_id(thread_id)}")


# --- streams ------------------------------------------------------------------------------------------------
def location(rec: RunRecord, stateless: bool) -> dict[str, str]:
    """The Content-Location of a run."""
    path = f"/runs/{rec.run_id}" if stateless else f"/threads/{rec.thread_id}/runs/{rec.run_id}"
    return {"Content-Location": path}


def stream_headers(location: dict[str, str]) -> dict[str, str]:
    """The headers of a stream response."""
    return {**location, "Cache-Control": "no-store", "X-Accel-Buffering": "no"}


async def _sse(
    rec: RunRecord, modes: frozenset[str], after: int = 0, on_disconnect: Callable[[], None] | None = None
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
        if not finished and on_disconnect is not None:
            on_disconnect()


async def replayed(replay: Replay, modes: frozenset[str]) -> AsyncIterator[bytes]:
    """A kept stream's events, for the modes asked."""
    for event_id, name, data in replay.events:
        if wanted(name, modes):
            yield sse(name, data, str(event_id))


async def followed_elsewhere(
    ctx: ServeContext, rec: RunRecord, modes: frozenset[str], after: int, cancel: bool
) -> AsyncIterator[bytes]:
    """A run another server holds, from after id `after` to its end, read from the record store as
    that server appends its events (`cancel`: the run is cancelled when the client goes away first)."""
    queue: asyncio.Queue[tuple[int, str | None, Any]] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in follow_remote(ctx.settings, rec, after):
                await queue.put(item)
        except Exception as err:  # the store could not be read: the stream ends short
            log.warning("could not follow run %s of another server: %s", rec.run_id, err)
            await queue.put((0, None, None))

    task = asyncio.create_task(pump())
    finished = False
    try:
        while True:
            try:
                event_id, name, data = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
            except TimeoutError:
                yield b": heartbeat\n\n"
                continue
            if name is None:
                finished = True
                return
            if wanted(name, modes):
                yield sse(name, data, str(event_id))
    finally:
        task.cancel()
        if not finished and cancel:
            table = RunTable(ctx.settings, rec.tenant_id, rec.thread_id)
            # Not awaited here: the response is being cancelled, an await would not finish.
            background(asyncio.to_thread(table.cancel, rec.run_id, CancelAction.INTERRUPT.value))


def stream_response(
    ctx: ServeContext, rec: RunRecord, modes: frozenset[str], stateless: bool, cancel: bool, after: int = 0
) -> StreamingResponse:
    """The run's events as server-sent events, from after id `after` to its end (`cancel`: the run
    is cancelled when the client goes away first)."""
    on_disconnect = (lambda: ctx.engine.cancel(rec, CancelAction.INTERRUPT)) if cancel else None
    return StreamingResponse(
        _sse(rec, modes, after, on_disconnect),
        media_type="text/event-stream",
        headers=stream_headers(location(rec, stateless)),
    )
