"""The request bodies of the crons API as pydantic models (a bad schedule or a wrong type is a 422
naming the field, before anything is stored), as `langgraph_sdk`'s `client.crons` sends them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictStr

from agent.serve.bodies import MAX_LIMIT, Body, JsonObject, RunInput, SortOrder, StreamMode
from agent.serve.crons import check_schedule, check_time

Schedule = Annotated[StrictStr, AfterValidator(check_schedule)]
"""A 5-field cron expression (minute hour day month weekday), in UTC."""
EndTime = Annotated[datetime | None, AfterValidator(check_time)]
"""A time (ISO 8601; a time without a zone is UTC)."""
OnRunCompleted = Literal["delete", "keep"]
CronSortBy = Literal["cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"]
CronField = Literal[
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "enabled",
    "last_run",
]
PAYLOAD = (
    "input",
    "config",
    "context",
    "metadata",
    "interrupt_before",
    "interrupt_after",
    "webhook",
    "multitask_strategy",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "durability",
    "checkpoint_during",
)
"""The fields of a cron's body that make its runs' body (its `payload`)."""


class CronRun(Body):
    """What a cron's runs are made of (the run fields of a create or an update)."""

    input: RunInput = None
    metadata: JsonObject | None = None
    config: JsonObject | None = None
    context: JsonObject | None = None
    checkpoint_during: StrictBool | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    webhook: StrictStr | None = None
    stream_mode: StreamMode | list[StreamMode] | None = None
    stream_subgraphs: StrictBool | None = None
    stream_resumable: StrictBool | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    end_time: EndTime = None
    """No firing after this time (a time without a zone is UTC)."""
    enabled: StrictBool | None = None
    on_run_completed: OnRunCompleted | None = None
    """A stateless cron: `delete` (the default) or `keep` the thread of each run once it is over."""


class CronCreate(CronRun):
    """`POST /threads/{id}/runs/crons` and `POST /runs/crons`."""

    assistant_id: StrictStr
    schedule: Schedule
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None


class CronPatch(CronRun):
    """`PATCH /runs/crons/{cron_id}`: only the fields sent change."""

    schedule: Schedule | None = None


class CronSearch(Body):
    """`POST /runs/crons/search`."""

    assistant_id: StrictStr | None = None
    thread_id: StrictStr | None = None
    enabled: StrictBool | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0)
    sort_by: CronSortBy | None = None
    sort_order: SortOrder | None = None
    select: list[CronField] | None = None


class CronCount(Body):
    """`POST /runs/crons/count`."""

    assistant_id: StrictStr | None = None
    thread_id: StrictStr | None = None
