"""`WebSocket /threads/{id}/stream/events`: the thread-stream protocol over one socket
(`client.threads.stream(..., transport="websocket")`).

Frames in are commands `{"id", "method", "params"}`: `subscription.subscribe` (the params of
`POST .../stream/events`; answers `{"subscription_id", "replayed_events"}`, then sends the
subscription's events: the thread's runs this server holds from their start, then live ones),
`subscription.reconnect` (the same with a required `since`, the last `seq` the client got, and
optionally the `subscription_id` to keep: what a client whose socket broke subscribes again with,
sent only the events after `since`), `subscription.unsubscribe`, and the commands of
`POST .../commands` (`agent.serve.protocol_commands`). Each command is answered `{"type":
"success", "id", "result"}` or `{"type": "error", "id", "error", "message"}`. A caller who may not
open the socket, or a thread it cannot see, is closed with code 4000 + the HTTP status (4401,
4404), which the SDK does not retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from agent.core.errors import AgentrtError, ConfigError, NotFound
from agent.serve.auth import Principal, Unauthorized
from agent.serve.routes_protocol import check_channels, follower_for, held_count, protocol_events, run_command
from agent.serve.serve_context import ServeContext
from agent.serve.stream_bodies import EventStreamRequest, ProtocolCommand, ReconnectParams
from agent.serve.thread_follow import ThreadFollower

router = APIRouter()


class SubscriptionNotFound(NotFound):
    """An unsubscribe naming no subscription of the socket."""


class _Socket:
    """One client's socket: its subscriptions and the lock its frames are sent under."""

    def __init__(self, ws: WebSocket, ctx: ServeContext, principal: Principal, thread_id: str) -> None:
        self.ws, self.ctx, self.principal, self.thread_id = ws, ctx, principal, thread_id
        self.subs: dict[str, asyncio.Task[None]] = {}
        self.lock = asyncio.Lock()

    async def send(self, frame: dict[str, Any]) -> None:
        async with self.lock:
            await self.ws.send_text(json.dumps(frame, ensure_ascii=False, separators=(",", ":"), default=repr))

    async def _feed(self, follower: ThreadFollower, request: EventStreamRequest) -> None:
        async for event in protocol_events(follower, request):
            if event is not None:
                await self.send(event)

    def subscribe(self, request: EventStreamRequest, sid: str | None = None) -> dict[str, Any]:
        """Start sending the subscription's events (as `sid`: one of that id is replaced)."""
        check_channels(request)
        sid = sid or str(uuid.uuid4())
        old = self.subs.pop(sid, None)
        if old is not None:
            old.cancel()
        follower = follower_for(self.ctx, self.principal, self.thread_id, request)
        replayed = held_count(follower, request)
        self.subs[sid] = asyncio.create_task(self._feed(follower, request))
        return {"subscription_id": sid, "replayed_events": replayed}

    async def handle(self, frame: dict[str, Any]) -> dict[str, Any]:
        command = ProtocolCommand.model_validate(frame)
        params, method = command.params, command.method
        if method == "subscription.subscribe":
            result: dict[str, Any] | None = self.subscribe(EventStreamRequest.model_validate(params))
        elif method == "subscription.reconnect":
            request = ReconnectParams.model_validate(params)
            result = self.subscribe(request, request.subscription_id)
        elif method == "subscription.unsubscribe":
            task = self.subs.pop(str(params.get("subscription_id")), None)
            if task is None:
                raise SubscriptionNotFound(f"no subscription {params.get('subscription_id')!r} on this socket")
            task.cancel()
            result = {}
        else:
            result = await run_command(self.ctx, self.principal, self.thread_id, method, params)
        if result is None:
            raise UnknownCommand(f"method: {method!r} is not offered on this socket")
        return {"type": "success", "id": command.id, "result": result}

    def close(self) -> None:
        for task in self.subs.values():
            task.cancel()


class UnknownCommand(ConfigError):
    """A frame naming no command of the protocol."""


def _error(frame: Any, err: Exception) -> dict[str, Any]:
    code = "invalid_argument"
    if isinstance(err, UnknownCommand):
        code = "unknown_command"
    elif isinstance(err, SubscriptionNotFound):
        code = "no_such_subscription"
    elif isinstance(err, NotFound):
        code = "no_such_checkpoint" if "checkpoint" in str(err) else "no_such_run"
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        message = f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    else:
        message = str(err)
    frame_id = frame.get("id") if isinstance(frame, dict) else None
    return {"type": "error", "id": frame_id, "error": code, "message": message}


@router.websocket("/threads/{thread_id}/stream/events")
async def thread_socket(websocket: WebSocket, thread_id: str) -> None:
    """Commands in, the answers and the subscribed events out, until either side closes."""
    ctx: ServeContext = websocket.app.state.ctx
    await websocket.accept()
    try:
        principal = ctx.auth.authenticate(websocket.headers, websocket.cookies)
        await run_in_threadpool(ctx.session, principal, thread_id)
    except Unauthorized:
        await websocket.close(code=4401, reason="unauthorized")
        return
    except NotFound:
        await websocket.close(code=4404, reason=f"thread {thread_id} not found; a run.start command creates it")
        return
    sock = _Socket(websocket, ctx, principal, thread_id)
    try:
        while True:
            raw = await websocket.receive_text()
            try:
                frame = json.loads(raw)
            except ValueError:
                await sock.send({"type": "error", "id": None, "error": "invalid_argument", "message": "not JSON"})
                continue
            try:
                answer = await sock.handle(frame)
            except (AgentrtError, ValidationError) as err:
                answer = _error(frame, err)
            await sock.send(answer)
    except WebSocketDisconnect:
        pass
    finally:
        sock.close()
        with contextlib.suppress(RuntimeError):
            await websocket.close()
