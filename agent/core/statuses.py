"""The statuses agentrt compares, in one place: a session's, a run's, and why the loop finished.

Enums, so a status is never a bare string: `str(RunStatus.COMPLETED) == "COMPLETED"` and JSON
writes the value. The tables of which action each status allows are in `agent.session.lifecycle`.
"""

from __future__ import annotations

from enum import StrEnum


class SessionStatus(StrEnum):
    """Lifecycle of a session: only ACTIVE sessions take new user turns."""

    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    ENDED = "ENDED"
    EXPIRED = "EXPIRED"


class RunStatus(StrEnum):
    """Status of one run (a turn, and its resumes, until it closes)."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    """Waits for a human approval."""
    INTERRUPTED = "INTERRUPTED"
    """Stopped between steps (Ctrl-C, a worker stopping); `resume` continues it."""
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    RECOVERY_BLOCKED = "RECOVERY_BLOCKED"
    UNKNOWN = "UNKNOWN"
    """The graph state has no finish reason (no run reached the end yet)."""


class FinishReason(StrEnum):
    """Why the agent loop finished (`RunResult.finish_reason`, the graph's `finish_reason`)."""

    COMPLETED = "completed"
    MAX_ITERATIONS = "max_iterations"
    TOO_MANY_FAILURES = "too_many_failures"
    CONTEXT_EXHAUSTED = "context_exhausted"
    REJECTED = "rejected"
