"""`GET /threads/{id}/stream` (`threads.join_stream`): a thread's events as server-sent events, run
after run, until the client goes away.

`stream_mode` (or `stream_modes`, comma-separated, as LangGraph's server reads it; default
`run_modes`): `run_modes` sends every event of the thread's runs (each starts with its `metadata`
event and ends with `metadata` `{"status": "run_done", "run_id"}`), `lifecycle` only those two,
`state_update` each state edit (`{"state": ThreadState, "thread_id"}`). Event ids are
`<run id>:<n>`; a `Last-Event-ID` of that form resumes after that event (the rest of that run,
then the runs after it, while this server holds them); without one the stream starts now (a
running run from its next event). Runs another server over the same store holds are followed too
(agent/serve/remote_runs.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError
from agent.serve.auth import Principal
from agent.serve.deps import get_ctx, get_principal
from agent.serve.run_service import HEARTBEAT_S, stream_headers
from agent.serve.serve_context import ServeContext
from agent.serve.stream_bodies import ThreadStreamMode
from agent.serve.streams import sse
from agent.serve.thread_follow import END, STATE_UPDATE, ThreadFollower, ThreadItem

router = APIRouter(tags=["threads"])
MODES = frozenset(get_args(ThreadStreamMode))


def thread_event_id(item: ThreadItem) -> str | None:
    """`<run id>:<n>` for a run's event (None for a state edit)."""
    return f"{item.run.run_id}:{item.event_id}" if item.run is not None else None


def parse_thread_event_id(value: str | None) -> tuple[str, int] | None:
    """A `Last-Event-ID` as (run id, event id); None when there is none or it is not of that form."""
    run_id, _, n = str(value or "").strip().rpartition(":")
    return (run_id, int(n)) if run_id and n.isdigit() else None


def _modes(stream_mode: list[str], stream_modes: str | None) -> frozenset[str]:
    asked = [m.strip() for m in (stream_modes or "").split(",") if m.strip()] + [m for m in stream_mode if m]
    unknown = sorted(set(asked) - MODES)
    if unknown:
        raise ConfigError(f"stream_mode: {', '.join(unknown)} is not one of {', '.join(sorted(MODES))}")
    return frozenset(asked or ["run_modes"])


def _wanted(item: ThreadItem, modes: frozenset[str]) -> tuple[str, Any] | None:
    """The (event, data) to send for `item`, or None."""
    if item.name == STATE_UPDATE:
        return (item.name, item.data) if "state_update" in modes else None
    name, data = ("metadata", item.data) if item.name == END else (item.name, item.data)
    if "run_modes" in modes:
        return name, data
    starts = item.name == "metadata" and isinstance(data, dict) and "attempt" in data
    return (name, data) if "lifecycle" in modes and (starts or item.name == END) else None


async def _events(follower: ThreadFollower, modes: frozenset[str]) -> AsyncIterator[bytes]:
    async for item in follower.items(HEARTBEAT_S):
        if item is None:
            yield b": heartbeat\n\n"
            continue
        out = _wanted(item, modes)
        if out is not None:
            yield sse(out[0], out[1], thread_event_id(item))


@router.get("/threads/{thread_id}/stream")
async def join_thread_stream(
    thread_id: str,
    stream_mode: Annotated[list[str], Query()] = [],  # noqa: B006 (FastAPI copies query defaults)
    stream_modes: str | None = None,
    last_event_id: str | None = Header(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """The thread's events (`run_modes`, `lifecycle`, `state_update`) from now, or after
    `Last-Event-ID`, until the client goes away."""
    modes = _modes(stream_mode, stream_modes)
    await run_in_threadpool(ctx.session, principal, thread_id)  # 404 for a thread the caller cannot see
    follower = ThreadFollower(ctx, principal.tenant_id, thread_id, resume=parse_thread_event_id(last_event_id))
    return StreamingResponse(
        _events(follower, modes),
        media_type="text/event-stream",
        headers=stream_headers({"Content-Location": f"/threads/{thread_id}"}),
    )
