"""Assistants: the one `agentrt` graph (search, get, graph, schemas, subgraphs)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from agent.serve.auth import Principal
from agent.serve.bodies import AssistantCount, AssistantSearch
from agent.serve.deps import get_ctx, get_principal
from agent.serve.serve_context import GRAPH_ID, ServeContext

router = APIRouter(prefix="/assistants", tags=["assistants"])


@router.post("/search")
def search_assistants(
    request: AssistantSearch | None = None,
    ctx: ServeContext = Depends(get_ctx),
    _: Principal = Depends(get_principal),
) -> list[dict[str, Any]]:
    """The assistants matching `graph_id` / `name` / `metadata` (there is one)."""
    return _matching(request.given() if request else {}, ctx)


def _matching(body: dict[str, Any], ctx: ServeContext) -> list[dict[str, Any]]:
    assistant = ctx.assistant()
    if body.get("graph_id") not in (None, GRAPH_ID) or body.get("name") not in (None, assistant["name"]):
        return []
    meta = body.get("metadata") or {}
    if any(assistant["metadata"].get(k) != v for k, v in meta.items()):
        return []
    return [assistant][int(body.get("offset") or 0) :][: int(body.get("limit") or 10)]


@router.post("/count")
def count_assistants(
    request: AssistantCount | None = None,
    ctx: ServeContext = Depends(get_ctx),
    _: Principal = Depends(get_principal),
) -> int:
    """How many assistants match."""
    return len(_matching({**(request.given() if request else {}), "limit": 100}, ctx))


@router.get("/{assistant_id}")
def get_assistant(
    assistant_id: str, ctx: ServeContext = Depends(get_ctx), _: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """One assistant (by assistant id or graph id)."""
    ctx.check_assistant(assistant_id)
    return ctx.assistant()


@router.get("/{assistant_id}/graph")
def get_graph(
    assistant_id: str,
    xray: bool | int = False,
    ctx: ServeContext = Depends(get_ctx),
    _: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """The graph's nodes and edges (LangGraph's drawable JSON)."""
    ctx.check_assistant(assistant_id)
    graph: dict[str, Any] = ctx.runner.graph.get_graph(xray=xray).to_json()
    return graph


@router.get("/{assistant_id}/schemas")
def get_schemas(
    assistant_id: str, ctx: ServeContext = Depends(get_ctx), _: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """Input, output, state, config and context JSON schemas of the graph."""
    ctx.check_assistant(assistant_id)
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
        "context_schema": attempt(graph.get_context_jsonschema, None),
    }


def _fields_schema(schema: Any) -> dict[str, Any] | None:
    fields = getattr(schema, "__annotations__", None)
    if not fields:
        return None
    return {"title": getattr(schema, "__name__", "state"), "type": "object", "properties": {k: {} for k in fields}}


@router.get("/{assistant_id}/subgraphs")
def get_subgraphs(
    assistant_id: str, ctx: ServeContext = Depends(get_ctx), _: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """The agentrt graph has no subgraphs."""
    ctx.check_assistant(assistant_id)
    return {}
