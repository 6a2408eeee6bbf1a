"""The open Agent Protocol (langchain-ai/agent-protocol) under `/ap`: agents, runs by id, and the
same threads and store routes as LangGraph's API (app.py mounts those under `/ap` too).

Each route answers as the protocol's OpenAPI document specifies, over the same runs and threads as
LangGraph's routes: `POST /ap/runs` with a `thread_id` is a run on that thread, without one a
stateless run; `POST /ap/runs/wait` answers `{run, values, messages}`; a run is found by its id
alone (agent/serve/agent_protocol.py). agentrt's rules stay: a run is never deleted on its own
(`DELETE /ap/runs/{id}` answers 422: delete its thread); the agents are the tenant's assistants.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Response, WebSocket
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError, NotFound, SessionNotFound
from agent.serve import routes_assistants, routes_protocol, routes_protocol_ws, routes_runs, routes_store
from agent.serve.agent_protocol import (
    PREFIX,
    AgentSearch,
    ApRunCreate,
    ApRunSearch,
    agent,
    as_ap_run,
    remember,
    run_body,
    thread_of,
)
from agent.serve.auth import Principal
from agent.serve.bodies import StreamMode
from agent.serve.deps import get_ctx, get_principal
from agent.serve.run_service import final_values, listed_run, runs_of, start, stream_response
from agent.serve.search import search_filters
from agent.serve.serve_context import ServeContext
from agent.serve.store_bodies import StoreNamespaces
from agent.serve.stream_bodies import EventStreamRequest
from agent.serve.streams import normalize_modes

router = APIRouter(prefix=PREFIX, tags=["agent protocol"])


# --- agents -------------------------------------------------------------------------------------------------
@router.post("/agents/search")
def search_agents(
    request: AgentSearch, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> list[dict[str, Any]]:
    """The caller's agents (the built-in `agentrt` and the tenant's assistants) matching `name` /
    `metadata`."""
    found = []
    for one in map(agent, ctx.assistants.all(principal.tenant_id)):
        if request.name is not None and request.name != one["name"]:
            continue
        if any(one["metadata"].get(k) != v for k, v in (request.metadata or {}).items()):
            continue
        found.append(one)
    return found[request.offset : request.offset + request.limit]


@router.get("/agents/{agent_id}")
def get_agent(
    agent_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """The agent (404 for another tenant's)."""
    return agent(ctx.assistants.get(principal.tenant_id, agent_id))


@router.get("/agents/{agent_id}/schemas")
async def get_agent_schemas(
    agent_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """The agent's input, output, state and config schemas (JSON Schema)."""
    found = await routes_assistants.get_schemas(agent_id, ctx, principal)
    keys = ("input_schema", "output_schema", "state_schema", "config_schema")
    return {"agent_id": agent_id, **{k: found.get(k) or {} for k in keys}}


# --- runs ---------------------------------------------------------------------------------------------------
async def _start(ctx: ServeContext, principal: Principal, request: ApRunCreate, streaming: bool = False) -> Any:
    body = run_body(request)
    rec = await start(ctx, principal, request.thread_id, body, streaming)
    await run_in_threadpool(remember, ctx, principal.tenant_id, rec.run_id, rec.thread_id)
    return rec, body


@router.post("/runs")
async def create_run(
    request: ApRunCreate, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> JSONResponse:
    """Start a run (on `thread_id`, else on a new thread); the Run."""
    rec, _ = await _start(ctx, principal, request)
    return JSONResponse(as_ap_run(rec.to_json()), headers={"Content-Location": f"{PREFIX}/runs/{rec.run_id}"})


@router.post("/runs/stream")
async def create_and_stream_run(
    request: ApRunCreate, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> StreamingResponse:
    """Start a run and stream its events (server-sent events, LangGraph's stream modes)."""
    rec, body = await _start(ctx, principal, request, streaming=True)
    cancel = body.get("on_disconnect") == "cancel"
    return stream_response(ctx, rec, normalize_modes(body.get("stream_mode")), request.thread_id is None, cancel)


@router.post("/runs/wait")
async def create_and_wait_run(
    request: ApRunCreate, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """Start a run and answer, once it is over, `{run, values, messages}`."""
    rec, _ = await _start(ctx, principal, request)
    await rec.wait()
    values = final_values(rec)
    return {"run": as_ap_run(rec.to_json()), "values": values, "messages": _messages(values)}


@router.post("/runs/search")
def search_runs(
    request: ApRunSearch, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> list[dict[str, Any]]:
    """The caller's runs, newest thread first: of `thread_id`, or of the threads the index lists
    newest first, read until the page is full."""
    agent_id = None
    if request.agent_id is not None:
        try:
            agent_id = ctx.assistants.get(principal.tenant_id, request.agent_id)["assistant_id"]
        except NotFound:
            return []
    wanted = request.offset + request.limit
    found: list[dict[str, Any]] = []
    for thread_id in _threads(ctx, principal, request.thread_id, wanted):
        try:
            runs = runs_of(ctx, principal.tenant_id, thread_id)
        except SessionNotFound:
            continue
        for run in runs:
            shaped = as_ap_run(run)
            if agent_id is not None and shaped["agent_id"] != agent_id:
                continue
            if request.status and shaped["status"] != request.status:
                continue
            if any(shaped["metadata"].get(k) != v for k, v in (request.metadata or {}).items()):
                continue
            found.append(shaped)
        if len(found) >= wanted:
            break
    return found[request.offset : wanted]


def _threads(ctx: ServeContext, principal: Principal, thread_id: str | None, wanted: int) -> list[str]:
    if thread_id is not None:
        ctx.session(principal, thread_id)  # 404 for a thread the caller cannot see
        return [thread_id]
    where = search_filters({}, ctx, principal)
    if where is None:
        return []
    rows = ctx.runner.manager.search(principal.tenant_id, where, order="activity", descending=True, limit=wanted)
    assert isinstance(rows, list)
    return [row.session_id for row in rows]


@router.get("/runs/{run_id}")
def get_run(run_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)) -> Any:
    """One run."""
    return as_ap_run(listed_run(ctx, principal, thread_of(ctx, principal.tenant_id, run_id), run_id))


@router.delete("/runs/{run_id}", status_code=204)
def delete_run(
    run_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> Response:
    """Refused: a run is part of its session's history (delete the thread to remove it)."""
    listed_run(ctx, principal, thread_of(ctx, principal.tenant_id, run_id), run_id)
    raise ConfigError("agentrt keeps every run in the session's history; delete the thread to remove it")


@router.get("/runs/{run_id}/wait")
async def wait_run(
    run_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """Wait for the run to end; `{run, values, messages}`."""
    thread_id = await run_in_threadpool(thread_of, ctx, principal.tenant_id, run_id)
    values = await routes_runs.join_run(thread_id, run_id, ctx, principal)
    run = await run_in_threadpool(listed_run, ctx, principal, thread_id, run_id)
    return {"run": as_ap_run(run), "values": values, "messages": _messages(values)}


@router.get("/runs/{run_id}/stream")
async def stream_run(
    run_id: str,
    stream_mode: list[StreamMode | Literal[""]] | None = Query(default=None),
    last_event_id: str | None = Header(default=None),
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """The run's events after `Last-Event-ID` (all without it), to its end."""
    thread_id = await run_in_threadpool(thread_of, ctx, principal.tenant_id, run_id)
    return await routes_runs.join_stream(thread_id, run_id, stream_mode, False, last_event_id, ctx, principal)


@router.post("/runs/{run_id}/cancel", status_code=204)
async def cancel_run(
    run_id: str,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """Cancel the run (as `POST /threads/{id}/runs/{run}/cancel`); with `wait`, once it stopped."""
    thread_id = await run_in_threadpool(thread_of, ctx, principal.tenant_id, run_id)
    await routes_runs.cancel_run(thread_id, run_id, wait, action, ctx, principal)
    return Response(status_code=204)


# --- thread streams: the protocol's paths for the thread-stream routes ------------------------------------
@router.websocket("/threads/{thread_id}/stream")
async def open_thread_websocket_stream(websocket: WebSocket, thread_id: str) -> None:
    """Commands in, answers and events out (as the WebSocket of `/threads/{id}/stream/events`; declared
    before the POST of the same path, which would answer a WebSocket handshake 405)."""
    await routes_protocol_ws.thread_socket(websocket, thread_id)


@router.post("/threads/{thread_id}/stream")
async def open_thread_sse_stream(
    thread_id: str,
    request: EventStreamRequest,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> StreamingResponse:
    """The thread's events over server-sent events (as `POST /threads/{id}/stream/events`)."""
    return await routes_protocol.stream_events(thread_id, request, ctx, principal)


# --- store: the protocol answers the namespaces as a bare list ----------------------------------------------
@router.post("/store/namespaces")
def list_namespaces(
    request: StoreNamespaces | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> list[list[str]]:
    """The tenant's namespaces (as `POST /store/namespaces`), a list of label lists."""
    return list(routes_store.list_namespaces(request, ctx, principal)["namespaces"])


def _messages(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The values' messages as the protocol's (`role`, `content`, `id`)."""
    roles = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
    out = []
    for m in values.get("messages") or []:
        if isinstance(m, dict) and "content" in m:
            role = roles.get(str(m.get("type")), str(m.get("role") or m.get("type") or "assistant"))
            out.append({"role": role, "content": m["content"], **({"id": m["id"]} if m.get("id") else {})})
    return out
