"""`WebSocket /threads/{id}/stream/events`: the thread-stream protocol over one socket
(`client.threads.stream(..., transport="websocket")`).

Frames in are commands `{"id", "method", "params"}`: `subscription.subscribe` (the params of
`POST .../stream/events`; answers `{"subscription_id"}`, then sends the subscription's events),
`subscription.unsubscribe`, and the commands of `POST .../commands` (`run.start`,
`input.respond`, `state.get`). Each command is answered `{"type": "success", "id", "result"}` or
`{"type": "error", "id", "error", "message"}`. A caller who may not open the socket, or a thread it
cannot see, is closed with code 4000 + the HTTP status (4401, 4404), which the SDK does not retry.
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

from agent.errors import AgentrtError, ConfigError, NotFound
from agent.serve.auth import Principal, Unauthorized
from agent.serve.routes_protocol import (
    check_channels,
    follower_for,
    input_respond,
    protocol_events,
    run_start,
    state_get,
)
from agent.serve.serve_context import ServeContext
from agent.serve.stream_bodies import EventStreamRequest, ProtocolCommand

router = APIRouter()


class _Socket:
    """One client's socket: its subscriptions and the lock its frames are sent under."""

    def __init__(self, ws: WebSocket, ctx: ServeContext, principal: Principal, thread_id: str) -> None:
        self.ws, self.ctx, self.principal, self.thread_id = ws, ctx, principal, thread_id
        self.subs: dict[str, asyncio.Task[None]] = {}
        self.lock = asyncio.Lock()

    async def send(self, frame: dict[str, Any]) -> None:
        async with self.lock:
            await self.ws.send_text(json.dumps(frame, ensure_ascii=False, separators=(",", ":"), default=repr))

    async def _feed(self, request: EventStreamRequest) -> None:
        follower = follower_for(self.ctx, self.principal, self.thread_id, request)
        async for event in protocol_events(follower, request):
            if event is not None:
                await self.send(event)

    async def handle(self, frame: dict[str, Any]) -> dict[str, Any]:
        command = ProtocolCommand.model_validate(frame)
        params, tid, ctx, who = command.params, self.thread_id, self.ctx, self.principal
        if command.method == "subscription.subscribe":
            request = EventStreamRequest.model_validate(params)
            check_channels(request)
            sid = str(uuid.uuid4())
            self.subs[sid] = asyncio.create_task(self._feed(request))
            result: dict[str, Any] = {"subscription_id": sid}
        elif command.method == "subscription.unsubscribe":
            task = self.subs.pop(str(params.get("subscription_id")), None)
            if task is None:
                raise NotFound(f"no subscription {params.get('subscription_id')!r} on this socket")
            task.cancel()
            result = {}
        elif command.method == "run.start":
            result = await run_start(ctx, who, tid, params)
        elif command.method == "input.respond":
            result = await input_respond(ctx, who, tid, params)
        elif command.method == "state.get":
            result = await run_in_threadpool(state_get, ctx, who, tid)
        else:
            raise ConfigError(f"method: {command.method!r} is not offered on this socket")
        return {"type": "success", "id": command.id, "result": result}

    def close(self) -> None:
        for task in self.subs.values():
            task.cancel()


def _error(frame: Any, err: Exception) -> dict[str, Any]:
    code = "no_such_subscription" if isinstance(err, NotFound) else "invalid_argument"
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
