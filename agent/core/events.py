"""agentrt's session event log: the entry types a session records and the fields of its header.

The log itself (`checkpointing.entry_log.EventLog`) is a generic append-only entry tree; this module
is what makes it a session's history. `SESSION_EVENTS` is the schema every log of a session is
opened with (`session_event_log`), so `append` refuses a type not listed here and the header line
is `{kind, schema_version, tenant_id, agent_id, user_id, session_id, created_at, config_digest}`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkpointing.entry_log import EventLog, EventSchema

HEADER_FIELDS = ("tenant_id", "agent_id", "user_id", "session_id", "created_at", "config_digest")
"""The header of a session's event log, in the order it is written."""

EVENT_TYPES: frozenset[str] = frozenset(
    {
        "user_turn",
        "assistant_message",
        "node_start",
        "node_end",
        "model_call",
        "tool_call",
        "tool_result",
        "hitl_request",
        "hitl_decision",
        "run_start",
        "run_pause",
        "run_resume",
        "run_end",
        "run_fail",
        "recovery_blocked",
        "recovery_override",
        "branch_created",
        "branch_switched",
        "branch_renamed",
        "branch_deleted",
        "compression",
        "sandbox",
        "sandbox_created",
        "sandbox_destroyed",
    }
)
"""Every entry type a session's event log may hold."""

SESSION_EVENTS = EventSchema(types=EVENT_TYPES, header_fields=HEADER_FIELDS)
"""The schema of a session's event log."""


def session_event_log(base_dir: Path | str, tenant_id: str, session_id: str, **options: Any) -> EventLog:
    """The event log of one session, opened with `SESSION_EVENTS` (`options` as for `EventLog`)."""
    return EventLog(base_dir, tenant_id, session_id, schema=SESSION_EVENTS, **options)


def of_run(run_id: str | None) -> dict[str, str] | None:
    """`where` for `EventLog.newest`: entries whose payload names run `run_id` (None: of any run)."""
    return None if run_id is None else {"run_id": run_id}


__all__ = ["EVENT_TYPES", "HEADER_FIELDS", "SESSION_EVENTS", "of_run", "session_event_log"]
