"""The request bodies of the API as pydantic models: a wrong type or an unknown enum value is a 422
naming the field, before a route touches a store.

Every field `langgraph_sdk` sends is declared (some only to be accepted: `ttl`, `supersteps`,
`durability`, ...); fields nobody declared are ignored, as LangGraph's server does. Routes read a
body as `model_dump(exclude_unset=True)`, so a field the client left out stays absent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
SortOrder = Literal["asc", "desc"]
ThreadSortBy = Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"]
AssistantSortBy = Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"]
RunStatusName = Literal["pending", "running", "error", "success", "timeout", "interrupted"]
StreamMode = Literal[
    "values",
    "messages",
    "messages-tuple",
    "updates",
    "events",
    "tasks",
    "checkpoints",
    "debug",
    "custom",
    "tools",
    "lifecycle",
]
"""Every mode the SDK knows; `tools` and `lifecycle` are accepted and send nothing (agent/serve/streams.py)."""
MAX_AFTER_S = 7 * 24 * 3600
"""The longest `after_seconds` a run may wait before it starts (a week)."""
MAX_LIMIT = 1000
"""The largest page a search or a history answers at once (LangGraph's server caps its own at 1000)."""


INT64 = (-(2**63), 2**63 - 1)


def _storable(value: Any) -> Any:
    """JSON the stores can keep: an integer beyond 64 bits is refused here, not by the encoder
    halfway through a write."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool) and not INT64[0] <= item <= INT64[1]:
            raise ValueError(f"integer {item} does not fit in 64 bits")
    return value


def _searchable(value: dict[str, Any]) -> dict[str, Any]:
    for key in value:
        if not key or '"' in key or "\\" in key:
            raise ValueError(f"metadata key {key!r} cannot be searched (empty, or holds a quote or backslash)")
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_storable)]
"""A JSON object the server stores (thread metadata, run metadata, config)."""
RunInput = Annotated[dict[str, Any] | list[Any] | str | None, AfterValidator(_storable)]
"""A run's `input`: storable JSON."""
SearchMetadata = Annotated[dict[str, Any], AfterValidator(_storable), AfterValidator(_searchable)]
"""Metadata to filter by: storable, and every key one the index can look up."""


class Body(BaseModel):
    """A request body: unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    def given(self) -> dict[str, Any]:
        """The fields the client sent (None where it sent null)."""
        return self.model_dump(exclude_unset=True)


class Checkpoint(Body):
    """A checkpoint reference (`checkpoint_id`, `checkpoint_ns`, `checkpoint_map`)."""

    checkpoint_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_map: dict[str, Any] | None = None
    thread_id: str | None = None


class ThreadCreate(Body):
    """`POST /threads`."""

    thread_id: str | None = None
    metadata: JsonObject | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    supersteps: list[dict[str, Any]] | None = None
    ttl: int | float | dict[str, Any] | None = None


class ThreadSearch(Body):
    """`POST /threads/search`."""

    metadata: SearchMetadata | None = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: ThreadStatus | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0)
    sort_by: ThreadSortBy | None = None
    sort_order: SortOrder | None = None
    select: list[str] | None = None
    extract: dict[str, str] | None = None


class ThreadCount(Body):
    """`POST /threads/count`."""

    metadata: SearchMetadata | None = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: ThreadStatus | None = None


class ThreadPatch(Body):
    """`PATCH /threads/{id}`."""

    metadata: JsonObject | None = None
    ttl: int | float | dict[str, Any] | None = None


class StateCheckpoint(Body):
    """`POST /threads/{id}/state/checkpoint`."""

    checkpoint: Checkpoint
    subgraphs: bool | None = None
    select: list[str] | None = None


class StateUpdate(Body):
    """`POST /threads/{id}/state`: edit the state on a new branch (`agent.serve.state_edit`)."""

    values: dict[str, Any] | list[Any] | None = None
    checkpoint_id: str | None = None
    checkpoint: Checkpoint | None = None
    as_node: str | None = None


class History(Body):
    """`POST /threads/{id}/history`."""

    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    before: str | Checkpoint | None = None
    metadata: JsonObject | None = None
    checkpoint: Checkpoint | None = None
    select: list[str] | None = None


class RunCommand(Body):
    """A run's `command`: `resume` answers the pending interrupt (`update` / `goto` are refused later)."""

    resume: Annotated[Any, AfterValidator(_storable)] = None
    update: Any = None
    goto: Any = None


class RunCreate(Body):
    """`POST /threads/{id}/runs[/stream|/wait]` and `POST /runs[/stream|/wait]`."""

    assistant_id: str
    input: RunInput = None
    command: RunCommand | None = None
    config: JsonObject | None = None
    context: JsonObject | None = None
    metadata: JsonObject | None = None
    stream_mode: StreamMode | list[StreamMode] | None = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    """Nodes to stop before (or "*": every one); the run pauses there and a run without input continues."""
    interrupt_after: Literal["*"] | list[str] | None = None
    """Nodes to stop after (or "*")."""
    feedback_keys: list[str] | None = None
    webhook: str | None = None
    checkpoint: Checkpoint | None = None
    checkpoint_id: str | None = None
    checkpoint_during: bool | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: Annotated[float, Field(ge=0, le=MAX_AFTER_S)] | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    strict_resume: bool | None = None
    langsmith_tracer: dict[str, Any] | None = None

    def given(self) -> dict[str, Any]:
        """The fields sent, with `command` as sent too (its unset keys absent)."""
        out = super().given()
        if self.command is not None:
            out["command"] = self.command.given()
        return out


class RunsCancel(Body):
    """`POST /runs/cancel`."""

    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None


class AssistantSearch(Body):
    """`POST /assistants/search`."""

    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0)
    sort_by: AssistantSortBy | None = None
    sort_order: SortOrder | None = None
    select: list[str] | None = None


class AssistantCount(Body):
    """`POST /assistants/count`."""

    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None
