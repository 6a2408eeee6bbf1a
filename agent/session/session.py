"""ChatSession: the business session container (identity, status, branch/leaf, page history).

Its statuses and their transitions: docs/concepts/lifecycle.md.

It is the business layer only: `messages` is the page/display projection, never the agent loop's
graph-state `messages` (the model's context). Every store (L1 memory, L2 Redis, L3 SQL, the JSONL projection) keeps the
same JSON document, `ChatSession.to_json()`, and reads it back with `ChatSession.from_json()`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.core.errors import BackendUnavailable, SessionNotActive, quote_id
from agent.core.statuses import RunStatus, SessionStatus
from agent.session.lifecycle import SessionAction, transition
from checkpointing import layout

__all__ = ["THREAD_METADATA", "ChatSession", "PageMessage", "SessionStatus", "SessionStore", "utcnow"]

DEFAULT_MAX_LOOPS = 100
DEFAULT_EXPIRE_MINUTES = 60 * 24
THREAD_METADATA = "thread_metadata"
"""The key of `ChatSession.context` holding the user's metadata of a thread (searchable in listings)."""
MAIN_BRANCH = layout.MAIN_BRANCH
"""The branch a session starts on (its room is `workspace/`, see `checkpointing.layout`)."""


class SessionDocumentCorrupt(BackendUnavailable):
    """One stored session (Redis value, SQL row, session.json / events.jsonl) is damaged.

    Not an outage: the manager reads the next layer for this session and keeps the layer in use.
    """


def utcnow() -> datetime:
    """The current time, tz-aware UTC (every timestamp of a session is)."""
    return datetime.now(UTC)


class PageMessage(BaseModel):
    """One message of the page history (what a chat UI shows), tied to its event-log entry."""

    model_config = ConfigDict(extra="forbid")

    role: str
    """`user` or `assistant` (display roles, not LangChain message types)."""
    content: str
    entry_id: str | None = None
    """The `user_turn` / `assistant_message` entry of events.jsonl this message projects."""
    ts: datetime = Field(default_factory=utcnow)


class ChatSession(BaseModel):
    """The business session: routing keys, lifecycle, branch/leaf of the event tree, page history."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    session_id: str
    agent_id: str = Field(max_length=255)
    tenant_id: str
    """Access isolation key: every store keys on it and every read checks it."""
    user_id: str = Field(max_length=255)
    room_id: str | None = None
    """The file room (sandbox root) of this session."""
    sandbox_workspace: str = "."
    """The current working directory, relative to the room."""
    current_branch_id: str = MAIN_BRANCH
    current_leaf_entry_id: str | None = None
    """Newest entry of the current branch in events.jsonl; the next entry is parented to it."""
    status: SessionStatus = SessionStatus.ACTIVE
    messages: list[PageMessage] = Field(default_factory=list)
    """Page/history projection of the current branch (display and next-turn input)."""
    context: dict[str, Any] = Field(default_factory=dict)
    """Business context (JSON values only)."""
    loop_count: int = 0
    """Turns run in this session; a turn is refused once it reaches `max_loops`."""
    max_loops: int = DEFAULT_MAX_LOOPS
    dataset_list: list[str] = Field(default_factory=list)
    datasets_loaded: bool = False
    last_active_time: datetime = Field(default_factory=utcnow)
    expire_minutes: float = DEFAULT_EXPIRE_MINUTES
    """An ACTIVE session idle longer than this becomes EXPIRED; 0 or less means never."""
    created_at: datetime = Field(default_factory=utcnow)
    version: int = 0
    """Bumped by the manager on every save, so a newer copy can be told from an older one."""
    last_run_status: str | None = None
    """A `RunStatus` of the newest run, if any (changed only by `lifecycle.transition`)."""
    last_run_id: str | None = None

    @field_validator("last_active_time", "created_at")
    @classmethod
    def _tz_aware(cls, value: datetime) -> datetime:
        # Naive datetimes would compare wrongly against utcnow(); treat them as UTC.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    # -- expiry and status -------------------------------------------------------------------

    def expires_at(self) -> datetime | None:
        """When this session expires if it stays idle (None: never)."""
        if self.expire_minutes <= 0:
            return None
        return self.last_active_time + timedelta(minutes=self.expire_minutes)

    def is_expired(self, now: datetime | None = None) -> bool:
        """Whether the idle time has passed `expire_minutes` (regardless of status)."""
        at = self.expires_at()
        return at is not None and (now or utcnow()) >= at

    def is_active(self, now: datetime | None = None) -> bool:
        """True only when the status is ACTIVE and the session has not expired."""
        return self.status is SessionStatus.ACTIVE and not self.is_expired(now)

    def refresh_status(self, now: datetime | None = None) -> bool:
        """Move an expired ACTIVE session to EXPIRED; returns whether the status changed."""
        if self.status is SessionStatus.ACTIVE and self.is_expired(now):
            transition(self, SessionAction.EXPIRE)
            return True
        return False

    def touch(self, now: datetime | None = None) -> None:
        """Record activity now (restarts the expiry clock)."""
        self.last_active_time = now or utcnow()

    def check_can_start_turn(self, now: datetime | None = None) -> None:
        """Raise `SessionNotActive` unless a new user turn may run now (expired ACTIVE -> EXPIRED)."""
        self.refresh_status(now)
        transition(self.model_copy(), SessionAction.TURN)  # checks only: the turn itself counts later
        if self.loop_count >= self.max_loops:
            raise SessionNotActive(
                f"session {quote_id(self.session_id)} reached its limit of {self.max_loops} turns (max_loops); "
                "start a new session or raise max_loops in the config"
            )

    def reactivate(self) -> None:
        """The resume path: PAUSED (or ACTIVE) -> ACTIVE; ENDED / EXPIRED raise `LifecycleError`."""
        transition(self, SessionAction.RESUME)

    def mark_run(self, run_id: str, run_status: RunStatus | str) -> None:
        """Record the newest run's id and status (the run table); a PAUSED run pauses an ACTIVE session."""
        transition(self, run_id=run_id, run_status=run_status)

    # -- the stored document ------------------------------------------------------------------

    def to_json(self) -> str:
        """The JSON document every store keeps."""
        return self.model_dump_json()

    def to_dict(self) -> dict[str, Any]:
        """The stored document as plain JSON values."""
        data: dict[str, Any] = json.loads(self.to_json())
        return data

    @classmethod
    def from_json(cls, data: str | bytes | dict[str, Any]) -> ChatSession:
        """Decode a stored document (closed schema: unknown fields are rejected)."""
        if isinstance(data, dict):
            return cls.model_validate(data)
        return cls.model_validate_json(data)

    def key(self) -> tuple[str, str]:
        """(tenant_id, session_id): the identity every store keys on."""
        return (self.tenant_id, self.session_id)


class SessionStore(Protocol):
    """The small protocol every session layer implements (L1, L2, L3 SQL, JSONL).

    Stores key on (tenant_id, session_id) and never return another tenant's session; backend
    failures surface as `agent.core.errors.BackendUnavailable` with the original error as cause.
    """

    name: str
    """Short layer name used in warnings and read traces (L1, L2, SQL, JSONL)."""

    def get(self, tenant_id: str, session_id: str) -> ChatSession | None:
        """The stored session, or None when this layer does not hold it."""
        ...

    def put(self, session: ChatSession) -> None:
        """Store (insert or replace) the session."""
        ...

    def delete(self, tenant_id: str, session_id: str) -> None:
        """Remove the session from this layer (no error when absent)."""
        ...

    def list(self, tenant_id: str, user_id: str | None = None) -> list[ChatSession]:
        """The tenant's sessions held by this layer (only `user_id`'s when given)."""
        ...
