"""The thread-stream protocol of the newest `langgraph_sdk` (`client.threads.stream(...)`): commands
posted to `POST /threads/{id}/commands`, events read from `POST /threads/{id}/stream/events`
(server-sent events, `agent.serve.protocol_events`).

Commands: `run.start` (`assistant_id`, `input`, `config`, `metadata`: a run as `runs.create` starts
it; the thread is created on first use, with `metadata`), `input.respond` (`interrupt_id`,
`response`: the answer to a pending approval, a run of its own), `state.get` (the thread's values
and checkpoint). Each answers `{"type": "success", "id", "result"}`; a refused command answers
the HTTP error any route gives (404, 409, 422 naming the field) and starts nothing.

The event stream replays, from their first event, the thread's runs this server holds (as
LangGraph's server replays the thread's stream), then follows new ones until the client goes
away; `since` (the last `seq` the client got) skips what it already has, and `channels` /
`namespaces` filter.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from agent.errors import ConfigError, SessionNotFound
from agent.serve.assistants import ASSISTANT_ID
from agent.serve.auth import Principal
from agent.serve.deps import get_ctx, get_principal
from agent.serve.protocol_events import ProtocolTranslator, wanted
from agent.serve.run_record import RunRecord
from agent.serve.run_service import HEARTBEAT_S, start, stream_headers
from agent.serve.serve_context import ServeContext
from agent.serve.stream_bodies import (
    CHANNELS,
    EventStreamRequest,
    InputRespondParams,
    ProtocolCommand,
    RunStartParams,
)
from agent.serve.streams import sse
from agent.serve.thread_follow import Start, ThreadFollower

router = APIRouter(tags=["thread stream"])
WATCHER_CHANNELS = frozenset({"lifecycle", "input"})
_unseen_ends: OrderedDict[str, None] = OrderedDict()
"""Runs started by a command whose end no lifecycle watcher has been sent yet (newest last)."""
_watched: OrderedDict[str, None] = OrderedDict()
"""Runs a lifecycle watcher has followed (one may find a run before its command has answered)."""
UNSEEN_KEPT = 10000
RUN_MODES = ["values", "updates", "messages-tuple", "custom", "tasks", "checkpoints"]
"""What a run started by the protocol streams (what its events are made from)."""


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


def _params(model: type[RunStartParams] | type[InputRespondParams], params: dict[str, Any]) -> dict[str, Any]:
    try:
        return model.model_validate(params).given()
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in ("params", *first["loc"]))
        raise ConfigError(f"{where}: {first['msg']}") from None


async def run_start(ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """`run.start`: a run as `runs.create` starts it, on the thread made on first use; `{"run_id"}`."""
    given = _params(RunStartParams, params)
    if given.get("input") is None:  # a continuation: of a thread that is there
        try:
            await run_in_threadpool(ctx.session, principal, thread_id)
        except SessionNotFound:
            raise ConfigError("params.input: a new thread's first run needs input") from None
    body = {k: given[k] for k in ("assistant_id", "input", "config", "metadata") if given.get(k) is not None}
    rec = await start(ctx, principal, thread_id, {**body, "if_not_exists": "create", "stream_mode": RUN_MODES})
    _await_end(rec.run_id)
    return {"run_id": rec.run_id}


async def input_respond(
    ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]
) -> dict[str, Any]:
    """`input.respond`: the answer to the pending approval, as a run of its own; `{"run_id"}`."""
    given = _params(InputRespondParams, params)
    answers = given.get("responses") or ([given] if given.get("interrupt_id") else [])
    if len(answers) != 1 or not answers[0].get("interrupt_id"):
        raise ConfigError("params: send one answer: interrupt_id and response (agentrt asks one approval at a time)")
    (answer,) = answers
    resume = {str(answer["interrupt_id"]): answer.get("response")}
    body = {"assistant_id": ASSISTANT_ID, "command": {"resume": resume}, "stream_mode": RUN_MODES}
    if given.get("metadata"):
        body["metadata"] = given["metadata"]
    rec = await start(ctx, principal, thread_id, body)
    _await_end(rec.run_id)
    return {"run_id": rec.run_id}


def state_get(ctx: ServeContext, principal: Principal, thread_id: str) -> dict[str, Any]:
    """`state.get`: the thread's values and checkpoint."""
    state = ctx.state(ctx.session(principal, thread_id))
    return {"values": state["values"], "checkpoint": state.get("checkpoint")}


@router.post("/threads/{thread_id}/commands")
async def command(
    thread_id: str,
    request: ProtocolCommand,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """One protocol command: `run.start`, `input.respond`, `state.get`."""
    if request.method == "run.start":
        result = await run_start(ctx, principal, thread_id, request.params)
    elif request.method == "input.respond":
        result = await input_respond(ctx, principal, thread_id, request.params)
    elif request.method == "state.get":
        result = await run_in_threadpool(state_get, ctx, principal, thread_id)
    else:
        raise ConfigError(f"method: {request.method!r} is not offered; send run.start, input.respond or state.get")
    return {"type": "success", "id": request.id, "result": result}


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
