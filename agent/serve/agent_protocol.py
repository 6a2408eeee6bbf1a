"""The open Agent Protocol's shapes over agentrt's runs: its request bodies, its Agent and Run
objects, and where a run created through it lives.

The Agent Protocol (langchain-ai/agent-protocol) names runs by id alone (`/runs/{run_id}`), where
LangGraph's API names them by thread (`/threads/{thread_id}/runs/{run_id}`). A run made through
the protocol's routes is therefore written down in the tenant's reservations of the record store
(`ap-run-<run_id>` -> its thread, the same exclusive create a submitted turn uses), so any server
of the fleet, also after a restart, finds its thread. The run itself is an ordinary agentrt run:
the same record, stream and history as one made through LangGraph's routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from agent.core.errors import SessionNotFound, quote_id
from agent.serve.assistants import ASSISTANT_ID, GRAPH_ID
from agent.serve.bodies import MAX_LIMIT, Body, JsonObject, SearchMetadata, StreamMode, _storable
from agent.serve.serve_context import ServeContext
from agent.session.record_store import store
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id

PREFIX = "/ap"
"""Where `agentrt serve` answers the Agent Protocol (LangGraph's API keeps the root: the two
differ on `POST /runs/wait`, which answers the values in LangGraph's and `{run, values, messages}`
in the protocol's)."""
RESERVATION = "ap-run-"
AP_STATUSES = ("pending", "error", "success", "timeout", "interrupted")
"""The protocol's run statuses: it has no `running`; a run not over yet is `pending`."""


class ApMessage(Body):
    """A message of the protocol (`role` and `content`, a string or content blocks)."""

    role: str
    content: str | list[JsonObject]
    id: str | None = None
    metadata: JsonObject | None = None


class ApRunCreate(Body):
    """`POST /runs`, `/runs/stream`, `/runs/wait` of the protocol."""

    thread_id: str | None = None
    agent_id: str | None = None
    input: Annotated[dict[str, Any] | list[Any] | str | float | bool | None, AfterValidator(_storable)] = None
    messages: list[ApMessage] | None = None
    metadata: JsonObject | None = None
    config: JsonObject | None = None
    webhook: str | None = None
    on_completion: Literal["delete", "keep"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    stream_mode: StreamMode | list[StreamMode] | None = None


class ApRunSearch(Body):
    """`POST /runs/search`."""

    metadata: SearchMetadata | None = None
    status: Literal["pending", "error", "success", "timeout", "interrupted"] | None = None
    thread_id: str | None = None
    agent_id: str | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0)


class AgentSearch(Body):
    """`POST /agents/search`."""

    name: str | None = None
    metadata: JsonObject | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0)


def run_body(request: ApRunCreate) -> dict[str, Any]:
    """The protocol's run request as LangGraph's (`agent_id` is the assistant; `messages` are the
    input's messages, as Studio sends them)."""
    given = request.given()
    body: dict[str, Any] = {"assistant_id": given.pop("agent_id", None) or ASSISTANT_ID}
    given.pop("thread_id", None)
    messages = given.pop("messages", None)
    if messages:
        body["input"] = {"messages": [{"role": m["role"], "content": m["content"]} for m in messages]}
    if "input" in given and "input" not in body:
        body["input"] = given.pop("input")
    given.pop("input", None)
    body.update({k: v for k, v in given.items() if v is not None})
    return body


def agent(assistant: dict[str, Any]) -> dict[str, Any]:
    """An assistant (the built-in `agentrt`, or one the tenant made) as the protocol's Agent."""
    return {
        "agent_id": assistant["assistant_id"],
        "name": assistant["name"],
        "description": assistant.get("description") or "",
        "metadata": {**(assistant.get("metadata") or {}), "graph_id": assistant.get("graph_id", GRAPH_ID)},
        "capabilities": {"ap.io.messages": True, "ap.io.streaming": True},
    }


def as_ap_run(run: dict[str, Any]) -> dict[str, Any]:
    """LangGraph's Run as the protocol's (`agent_id`, and a status among the protocol's)."""
    out = {k: v for k, v in run.items() if k not in ("assistant_id", "kwargs", "multitask_strategy")}
    out["agent_id"] = run.get("assistant_id") or ASSISTANT_ID
    out["status"] = run["status"] if run["status"] in AP_STATUSES else "pending"
    return out


def remember(ctx: ServeContext, tenant_id: str, run_id: str, thread_id: str) -> None:
    """Write down the thread of a run made through the protocol (fsynced: found after a crash)."""
    store(ctx.settings).reserve(tenant_id, RESERVATION + run_id, {"thread_id": thread_id})


def thread_of(ctx: ServeContext, tenant_id: str, run_id: str) -> str:
    """The thread of a run made through the protocol; 404 for any other id (also another tenant's)."""
    missing = SessionNotFound(f"run {quote_id(run_id)} not found")
    try:
        validate_id(run_id, "run id")
    except InvalidIdError:
        raise missing from None
    found = store(ctx.settings).reserved(tenant_id, RESERVATION + run_id)
    if not found or not isinstance(found.get("thread_id"), str):
        raise missing
    return str(found["thread_id"])


def forget(ctx: ServeContext, tenant_id: str, run_id: str) -> None:
    """Drop the note of a run whose thread is gone."""
    store(ctx.settings).unreserve(tenant_id, RESERVATION + run_id)
