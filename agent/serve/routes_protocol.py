"""The thread-stream protocol of the newest `langgraph_sdk` (`client.threads.stream(...)`): commands
posted to `POST /threads/{id}/commands`, events read from `POST /threads/{id}/stream/events`
(server-sent events, `agent.serve.protocol_events`).

Commands (`agent.serve.protocol_commands`): `run.start`, `input.respond`, `input.inject`,
`state.get`, `state.listCheckpoints`, `state.fork`, `agent.getTree`. Each answers `{"type":
"success", "id", "result"}`; a refused command answers the HTTP error any route gives (404, 409,
422 naming the field) and starts nothing. The `subscription.*` commands are the WebSocket's
(`agent.serve.routes_protocol_ws`): over HTTP each event stream is a subscription.

The event stream replays, from their first event, the thread's runs this server holds (as
LangGraph's server replays the thread's stream), then follows new ones until the client goes
away, those another server over the same store runs on the thread too (agent/serve/remote_runs.py);
`since` (the last `seq` the client got) skips what it already has, and `channels` / `namespaces`
filter.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError, SessionNotFound
from agent.serve.auth import Principal
from agent.serve.deps import get_ctx, get_principal
from agent.serve.protocol_commands import COMMANDS, execute
from agent.serve.protocol_events import ProtocolTranslator, wanted
from agent.serve.run_record import RunRecord
from agent.serve.run_service import HEARTBEAT_S, stream_headers
from agent.serve.serve_context import ServeContext
from agent.serve.stream_bodies import CHANNELS, EventStreamRequest, ProtocolCommand
from agent.serve.streams import sse
from agent.serve.thread_follow import END, Start, ThreadFollower, ThreadItem

router = APIRouter(tags=["thread stream"])
WATCHER_CHANNELS = frozenset({"lifecycle", "input"})
_unseen_ends: OrderedDict[str, None] = OrderedDict()
"""Runs started by a command whose end no lifecycle watcher has been sent yet (newest last)."""
_watched: OrderedDict[str, None] = OrderedDict()
"""Runs a lifecycle watcher has followed (one may find a run before its command has answered)."""
UNSEEN_KEPT = 10000


def _remember(kept: OrderedDict[str, None], run_id: str) -> None:
    kept[run_id] = None
    while len(kept) > UNSEEN_KEPT:
        kept.popitem(last=False)


def _await_end(run_id: str) -> None:
    if run_id not in _watched:
        _remember(_unseen_ends, run_id)


def follower_for(
    ctx: ServeContext, principal: Principal, thread_id: str, request: EventStreamRequest
) -> ThreadFollower:
    """The follower of one event stream: the thread's runs from their start, and those this server
    holds in full. The SDK takes the first run end its lifecycle watcher (a stream of `lifecycle`
    and `input` only) gets as the end of the run it started, so a watcher is sent the end of a run
    already over only when the run was started by a command and no watcher has had it: one opened
    on a thread whose last run is over follows the next run, not the last."""
    if not set(request.channels) <= WATCHER_CHANNELS:
        return ThreadFollower(ctx, principal.tenant_id, thread_id, Start.HISTORY)

    def unseen(rec: RunRecord) -> bool:
        _remember(_watched, rec.run_id)
        return _unseen_ends.pop(rec.run_id, False) is None

    return ThreadFollower(ctx, principal.tenant_id, thread_id, Start.HISTORY, replay_finished=unseen)


@router.post("/threads/{thread_id}/commands")
async def command(
    thread_id: str,
    request: ProtocolCommand,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """One protocol command (`agent.serve.protocol_commands`): `run.start`, `input.respond`,
    `input.inject`, `state.get`, `state.listCheckpoints`, `state.fork`, `agent.getTree`."""
    result = await run_command(ctx, principal, thread_id, request.method, request.params)
    if result is None:
        if request.method.startswith("subscription."):
            raise ConfigError(
                f"method: {request.method} is a WebSocket command; over HTTP each POST .../stream/events "
                "is a subscription, resumed with since"
            )
        raise ConfigError(f"method: {request.method!r} is not offered; send one of {', '.join(COMMANDS)}")
    return {"type": "success", "id": request.id, "result": result}


async def run_command(
    ctx: ServeContext, principal: Principal, thread_id: str, method: str, params: dict[str, Any]
) -> dict[str, Any] | None:
    """The result of a protocol command (None: not a command of `agent.serve.protocol_commands`);
    a run it starts is one whose end a lifecycle watcher is sent."""
    result = await execute(ctx, principal, thread_id, method, params)
    if result is not None and result.get("run_id"):
        _await_end(str(result["run_id"]))
    return result


async def protocol_events(
    follower: ThreadFollower, request: EventStreamRequest
) -> AsyncIterator[dict[str, Any] | None]:
    """The protocol events a subscription asked for (None: a heartbeat)."""
    channels = frozenset(request.channels)
    since = request.since or 0
    translator = ProtocolTranslator()
    async for item in follower.items(HEARTBEAT_S):
        if item is None:
            yield None
            continue
        for event in translator.translate(item):
            if event["seq"] > since and wanted(event, channels, request.namespaces):
                yield event


def held_count(follower: ThreadFollower, request: EventStreamRequest) -> int:
    """How many of the events a subscription is sent were already held when it was made (what it
    replays before it follows live ones)."""
    channels, since = frozenset(request.channels), request.since or 0
    translator = ProtocolTranslator()
    count = 0
    for rec, after in follower.starts:
        items = [ThreadItem(rec, *item) for item in list(rec.streamed)[after:]]
        if rec.done.is_set() and not rec.trimmed:
            items.append(ThreadItem(rec, len(rec.streamed) + 1, END, {"status": END, "run_id": rec.run_id}))
        for item in items:
            events = translator.translate(item)
            count += sum(e["seq"] > since and wanted(e, channels, request.namespaces) for e in events)
    return count


def check_channels(request: EventStreamRequest) -> None:
    """Refuse channels the protocol does not have (422)."""
    unknown = sorted(c for c in request.channels if c not in CHANNELS and not c.startswith("custom:"))
    if unknown:
        raise ConfigError(f"channels: {', '.join(unknown)} unknown; send some of {', '.join(sorted(CHANNELS))}")


async def _sse(follower: ThreadFollower, request: EventStreamRequest) -> AsyncIterator[bytes]:
    async for event in protocol_events(follower, request):
        yield b": heartbeat\n\n" if event is None else sse(event["method"], event, str(event["seq"]))


@router.post("/threads/{thread_id}/stream/events")
async def stream_events(
    thread_id: str,
    request: EventStreamRequest,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """The thread's protocol events in `channels`, after `since`, until the client goes away."""
    check_channels(request)
    try:
        await run_in_threadpool(ctx.session, principal, thread_id)
    except SessionNotFound:
        raise SessionNotFound(f"thread {thread_id} not found; a run.start command creates it") from None
    return StreamingResponse(
        _sse(follower_for(ctx, principal, thread_id, request), request),
        media_type="text/event-stream",
        headers=stream_headers({"Content-Location": f"/threads/{thread_id}"}),
    )
