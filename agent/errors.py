"""The runtime's exception tree. Every message says what to do next.

AgentRuntimeError
 ├── ConfigError            the user's config or input is wrong (their fix)
 ├── ModelError             the model misbehaved or the scripted model ran out / was surprised
 ├── ToolError              a tool failed or was refused (sandbox escape, bad arguments)
 ├── StorageError           a backend (Redis, SQL, disk) failed; the original error is the cause
 ├── SessionError           the session cannot take this action
 │    ├── SessionNotFound
 │    └── SessionNotActive  PAUSED / ENDED / EXPIRED / max loops reached
 ├── LeaseHeld              another process holds the session lease
 └── RecoveryBlocked        resuming would run changed code/tools against old state
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from checkpointing.errors import DocumentMismatch


class AgentRuntimeError(Exception):
    """Root of every error agentrt raises on purpose."""


class ConfigError(AgentRuntimeError, ValueError):
    """Bad configuration or bad user input."""


class ModelError(AgentRuntimeError):
    """The chat model failed or returned something the runtime cannot use."""


class ToolError(AgentRuntimeError):
    """A tool call failed or was refused."""


class StorageError(AgentRuntimeError):
    """A storage backend failed."""


class SessionError(AgentRuntimeError):
    """The session cannot do what was asked."""


class SessionNotFound(SessionError, KeyError):
    """No session with this id is visible to this tenant/user."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "session not found"


class SessionNotActive(SessionError):
    """The session is PAUSED, ENDED, EXPIRED or out of loops."""


class LeaseHeld(AgentRuntimeError):
    """Another owner holds the session lease."""

    def __init__(self, session_id: str, holder: str, expires_at: float | None) -> None:
        self.session_id = session_id
        self.holder = holder
        self.expires_at = expires_at
        when = datetime.fromtimestamp(expires_at, UTC).isoformat(timespec="seconds") if expires_at is not None else "?"
        super().__init__(
            f"session {session_id} is held by {holder} (lease expires at {when}); "
            "wait for it to finish or expire, then resume"
        )


class RecoveryBlocked(AgentRuntimeError, DocumentMismatch):
    """Recovery refused to continue: state and code/tools/config no longer agree."""

    def __init__(self, step: str, reason: str, expected: Any = None, found: Any = None) -> None:
        DocumentMismatch.__init__(self, step, reason, expected, found)
        if step in ("validate_schema", "validate_graph", "validate_surface"):
            hint = "fix the cause, or re-pin explicitly with `agentrt resume ID --accept-changes`"
        else:
            hint = "restore the damaged or missing data from a backup; `agentrt doctor ID` shows what is wrong"
        self.args = (
            f"RECOVERY_BLOCKED at {step}: {reason} (expected {expected!r}, found {found!r}). "
            f"State was left untouched; {hint}.",
        )


class SchemaOutdated(ConfigError):
    """The SQL database has no agentrt schema, an older one, or a newer one than this agentrt knows.

    Raised before any turn starts; the message names the one command that fixes it.
    """
