"""Request bodies of the thread streams, the thread-stream protocol, batches of runs and pruning
(pydantic models: a wrong type or value is a 422 naming the field, before a route touches a store)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agent.serve.bodies import MAX_LIMIT, Body, JsonObject, RunCreate

ThreadStreamMode = Literal["run_modes", "lifecycle", "state_update"]
"""What `threads.join_stream` can follow: the runs' events, their starts and ends, state edits."""
Channel = str
"""A thread-stream channel (`values`, `updates`, `messages`, ..., or `custom:<name>`)."""
CHANNELS = frozenset({"values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"})


class ThreadPrune(Body):
    """`POST /threads/prune`."""

    thread_ids: list[str]
    strategy: Literal["delete", "keep_latest"] = "delete"


class BatchRun(RunCreate):
    """One run of `POST /runs/batch`: on `thread_id`, or without it on a new thread (a stateless run)."""

    thread_id: str | None = None


class EventStreamRequest(Body):
    """`POST /threads/{id}/stream/events`: which events, and where to resume (`since`: the last `seq`
    the client got)."""

    channels: list[Channel] = Field(min_length=1)
    namespaces: list[list[str]] | None = None
    depth: int | None = Field(default=None, ge=0)
    since: int | None = Field(default=None, ge=0)


class ProtocolCommand(Body):
    """`POST /threads/{id}/commands`: one command of the thread-stream protocol."""

    id: int = Field(ge=0)
    method: str
    params: dict[str, Any] = Field(default_factory=dict)


class RunStartParams(Body):
    """The params of `run.start`."""

    assistant_id: str
    input: Any = None
    config: JsonObject | None = None
    metadata: JsonObject | None = None
    langsmith_tracer: dict[str, Any] | None = None


class InputRespondParams(Body):
    """The params of `input.respond` (one answer, or `responses`: several)."""

    interrupt_id: str | None = None
    namespace: list[str] | None = None
    response: Any = None
    responses: list[dict[str, Any]] | None = None
    metadata: JsonObject | None = None


class InjectedMessage(Body):
    """The message of `input.inject`."""

    role: Literal["user", "system"]
    content: str = Field(max_length=100_000)
    name: str | None = None


class InjectParams(Body):
    """The params of `input.inject`."""

    namespace: list[str]
    message: InjectedMessage


class StateGetParams(Body):
    """The params of `state.get` (`keys`: only those state keys)."""

    namespace: list[str] | None = None
    keys: list[str] | None = None


class CheckpointListParams(Body):
    """The params of `state.listCheckpoints` (`before`: a checkpoint id; those older than it)."""

    namespace: list[str] | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    before: str | None = None


class ForkParams(Body):
    """The params of `state.fork` (`assistant_id`: agentrt's own when not given)."""

    checkpoint_id: str = Field(min_length=1)
    input: Any = None
    config: JsonObject | None = None
    metadata: JsonObject | None = None
    assistant_id: str | None = None


class TreeParams(Body):
    """The params of `agent.getTree`."""

    run_id: str | None = None


class ReconnectParams(EventStreamRequest):
    """The params of `subscription.reconnect` (WebSocket): a subscription's filter, the last `seq`
    the client got (required) and, to keep it, the subscription's id."""

    since: int = Field(ge=0)
    subscription_id: str | None = Field(default=None, min_length=1, max_length=200)
