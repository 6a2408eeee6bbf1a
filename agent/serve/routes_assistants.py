"""Assistants: create, update (a new version), delete, get, search, count, versions, set latest, and
the graph, schemas and subgraphs of the one graph they all run (`agent.serve.assistants`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response
from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError
from agent.serve.assistant_bodies import AssistantCreate, AssistantLatest, AssistantPatch, AssistantVersions
from agent.serve.assistant_threads import delete_assistant_threads
from agent.serve.assistants import GRAPH_ID, contains, settings_schema
from agent.serve.auth import Principal
from agent.serve.bodies import AssistantCount, AssistantSearch
from agent.serve.crons import CronBook
from agent.serve.deps import get_ctx, get_principal
from agent.serve.run_record import CancelAction
from agent.serve.serve_context import ServeContext

router = APIRouter(prefix="/assistants", tags=["assistants"])
TEXT_SORTS = ("name", "graph_id")


@router.post("")
async def create_assistant(
    request: AssistantCreate, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """A new assistant of the agentrt graph; its `config.configurable` (or `context`) holds only the
    settings a run may change. `if_exists`: `raise` (409, the default) or `do_nothing` (the one there)."""
    return await run_in_threadpool(ctx.assistants.create, principal.tenant_id, request.given())


@router.post("/search")
async def search_assistants(
    response: Response,
    request: AssistantSearch | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> list[dict[str, Any]]:
    """The assistants matching `graph_id` / `name` (a part of it, any case) / `metadata` (contained),
    sorted (default: newest first) and paged; `X-Pagination-Next` is the offset of the next page."""
    body = request.given() if request else {}
    found = _matching(await run_in_threadpool(ctx.assistants.all, principal.tenant_id), body)
    key = body.get("sort_by") or "created_at"
    reverse = (body.get("sort_order") or "desc") == "desc"
    found.sort(key=lambda a: str(a.get(key) or "").lower() if key in TEXT_SORTS else str(a.get(key)), reverse=reverse)
    offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
    if offset + limit < len(found):
        response.headers["X-Pagination-Next"] = str(offset + limit)
    page = found[offset : offset + limit]
    select = body.get("select")
    return [{k: v for k, v in a.items() if k in select} for a in page] if select else page


def _matching(assistants: list[dict[str, Any]], body: dict[str, Any]) -> list[dict[str, Any]]:
    graph_id, name, meta = body.get("graph_id"), body.get("name"), body.get("metadata") or {}
    return [
        a
        for a in assistants
        if (graph_id is None or a["graph_id"] == graph_id)
        and (not name or str(name).lower() in str(a.get("name") or "").lower())
        and contains(a.get("metadata") or {}, meta)
    ]


@router.post("/count")
async def count_assistants(
    request: AssistantCount | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> int:
    """How many assistants match."""
    body = request.given() if request else {}
    return len(_matching(await run_in_threadpool(ctx.assistants.all, principal.tenant_id), body))


@router.get("/{assistant_id}")
async def get_assistant(
    assistant_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """One assistant (by its id; the built-in one also by the graph id)."""
    return await run_in_threadpool(ctx.assistants.get, principal.tenant_id, assistant_id)


@router.patch("/{assistant_id}")
async def update_assistant(
    assistant_id: str,
    request: AssistantPatch,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """A new version of the assistant, made its latest: metadata merged, the other fields sent replaced."""
    return await run_in_threadpool(ctx.assistants.update, principal.tenant_id, assistant_id, request.given())


@router.delete("/{assistant_id}", status_code=204)
async def delete_assistant(
    assistant_id: str,
    delete_threads: bool = False,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """Remove the assistant and its versions (the built-in one cannot go: 409), as LangGraph's server
    does: its crons go too, and its runs in flight are cancelled (`interrupt`: a pending one never
    starts, a running one stops after its current step): those of this server at once, those of
    other servers over the store at their next check (agent/serve/run_watch.py); a new run
    naming it is refused (404). With `delete_threads`, its threads go too
    (agent/serve/assistant_threads.py)."""
    gone = await run_in_threadpool(ctx.assistants.delete, principal.tenant_id, assistant_id)
    await run_in_threadpool(CronBook(ctx.settings, principal.tenant_id).drop_assistant, gone)
    for rec in ctx.engine.live(principal.tenant_id):
        if rec.assistant_id == gone:
            await run_in_threadpool(ctx.engine.cancel, rec, CancelAction.INTERRUPT)
    if delete_threads:
        await delete_assistant_threads(ctx, principal, gone)
    return Response(status_code=204)


@router.post("/{assistant_id}/versions")
async def assistant_versions(
    assistant_id: str,
    request: AssistantVersions | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> list[dict[str, Any]]:
    """The assistant's versions, newest first (those whose metadata contains `metadata`)."""
    body = request.given() if request else {}
    versions = await run_in_threadpool(ctx.assistants.versions, principal.tenant_id, assistant_id)
    meta = body.get("metadata") or {}
    kept = [v for v in versions if contains(v.get("metadata") or {}, meta)]
    offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
    return kept[offset : offset + limit]


@router.post("/{assistant_id}/latest")
async def set_latest(
    assistant_id: str,
    request: AssistantLatest,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """Make one of the assistant's versions its current one (runs naming it use that version)."""
    return await run_in_threadpool(ctx.assistants.set_latest, principal.tenant_id, assistant_id, request.version)


def parse_xray(value: str | None) -> bool | int:
    """`xray` as LangGraph's server reads it: true / false, or a positive depth."""
    if value is None or value in ("false", "False"):
        return False
    if value in ("true", "True"):
        return True
    try:
        depth = int(value)
    except ValueError:
        depth = 0
    if depth <= 0:
        raise ConfigError(f"xray: {value!r} is not true, false or a positive depth")
    return depth


@router.get("/{assistant_id}/graph")
async def get_graph(
    assistant_id: str,
    xray: str | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """The graph's nodes and edges (LangGraph's drawable JSON); `xray` draws subgraphs (to a depth)."""
    depth = parse_xray(xray)
    await run_in_threadpool(ctx.assistants.get, principal.tenant_id, assistant_id)
    graph: dict[str, Any] = ctx.runner.graph.get_graph(xray=depth).to_json()
    return graph


@router.get("/{assistant_id}/schemas")
async def get_schemas(
    assistant_id: str, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """Input, output, state and config JSON schemas of the graph; the context schema is what an
    assistant's context (or configurable) may hold."""
    await run_in_threadpool(ctx.assistants.get, principal.tenant_id, assistant_id)
    graph = ctx.runner.graph

    builder = graph.builder

    def attempt(fn: Any, schema: Any) -> Any:
        try:
            return fn()
        except Exception:  # pydantic cannot build it (typing.TypedDict on 3.11): list the fields
            return _fields_schema(schema)

    return {
        "graph_id": GRAPH_ID,
        "input_schema": attempt(graph.get_input_jsonschema, builder.input_schema),
        "output_schema": attempt(graph.get_output_jsonschema, builder.output_schema),
        "state_schema": attempt(graph.get_output_jsonschema, builder.state_schema),
        "config_schema": attempt(lambda: graph.config_schema().model_json_schema(), None),
        "context_schema": settings_schema(ctx.settings),  # what an assistant's context may hold
    }


def _fields_schema(schema: Any) -> dict[str, Any] | None:
    fields = getattr(schema, "__annotations__", None)
    if not fields:
        return None
    return {"title": getattr(schema, "__name__", "state"), "type": "object", "properties": {k: {} for k in fields}}


@router.get("/{assistant_id}/subgraphs")
@router.get("/{assistant_id}/subgraphs/{namespace}")
async def get_subgraphs(
    assistant_id: str,
    namespace: str | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """The agentrt graph has no subgraphs."""
    await run_in_threadpool(ctx.assistants.get, principal.tenant_id, assistant_id)
    return {}
