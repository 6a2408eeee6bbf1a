"""The values the session index takes and gives: a session's row (`SessionRow`), what its health
check found (`IndexHealth`), and the error raised when it cannot answer (`IndexUnusable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from checkpointing.exceptions import CheckpointingError

State = Literal["ok", "missing", "damaged", "incomplete"]


class IndexUnusable(CheckpointingError):
    """The index cannot answer: its file is missing, damaged, or incomplete (rebuild it)."""

    def __init__(self, path: Path, state: State, detail: str = "") -> None:
        self.path = path
        self.state = state
        super().__init__(f"the session index {path} is {state}" + (f" ({detail})" if detail else ""))


@dataclass(frozen=True)
class SessionRow:
    """One session as the index holds it."""

    tenant_id: str
    session_id: str
    user_id: str
    status: str
    """As stored; in rows read back, the status at read time (an expired `live` row reads `expired`)."""
    created_at: datetime
    last_activity: datetime
    expires_at: datetime | None
    """When a `live` session becomes `expired` if nothing happens (None: never)."""
    version: int
    """The version of the session document this row was made from (rows never go backwards)."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Small searchable JSON values (filtered by `page(meta=...)`)."""
    stored_status: str | None = None
    """In rows read back: the status as stored, before expiry was applied."""


@dataclass(frozen=True)
class IndexHealth:
    """What `health()` found: the state of the file and how many rows it holds."""

    state: State
    rows: int = 0
    detail: str = ""


def instant(micros: int) -> datetime:
    """The instant a cursor's activity value (microseconds since the epoch) names, tz-aware UTC."""
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
