"""A session's runs as the API's Run objects, read back from its event log (any process wrote them)."""

from __future__ import annotations

from typing import Any

from agent.serve.context import ASSISTANT_ID
from agent.session.session import ChatSession
from checkpointing.events import EventLog

_CLOSING = {"run_end": "success", "run_fail": "error", "run_pause": "interrupted", "run_resume": "running"}
_RUN_TYPES = frozenset({"run_start", *_CLOSING})


def logged_runs(events: EventLog, session: ChatSession) -> list[dict[str, Any]]:
    """Every run of the session (all branches), oldest first, with the status its last entry gives."""
    runs: dict[str, dict[str, Any]] = {}
    for entry in events.entries(_RUN_TYPES):
        run_id = (entry.payload or {}).get("run_id")
        if not run_id:
            continue
        if entry.type == "run_start":
            runs[run_id] = {
                "run_id": run_id,
                "thread_id": session.session_id,
                "assistant_id": ASSISTANT_ID,
                "created_at": entry.ts,
                "updated_at": entry.ts,
                "status": "running",
                "metadata": {"branch_id": entry.branch_id},
                "multitask_strategy": "reject",
                "kwargs": {},
            }
        elif run_id in runs and entry.type in _CLOSING:
            runs[run_id]["status"] = _CLOSING[entry.type]
            runs[run_id]["updated_at"] = entry.ts
    for run in runs.values():
        # Unclosed: killed mid-run (a run live in this server replaces this entry with its own record);
        # a run without input continues it.
        if run["status"] == "running":
            run["status"] = "interrupted"
    return list(runs.values())
