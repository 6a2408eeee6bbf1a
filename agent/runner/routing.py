"""Which Celery queue a turn goes to: the queue of the graph version its session runs on.

A checkpoint written under one graph version (`graph.build.GRAPH_VERSION`) is refused by a
process of another (RECOVERY_BLOCKED). While workers of two versions run side by side (a rolling
upgrade), each worker consumes the shared queue (`workers.queue`) and the queue of its own version,
`<workers.queue>.<graph version>`:

- a turn of a session that has no run yet goes to the shared queue: any version may start it;
- a turn of a session that has run goes to the queue of the version of its latest run: the
  `graph_version` pin of the newest `run_start` in its event log, or the version an operator
  accepted for that run when resuming it (`recovery_override`); nothing else is read.

A queue is declared when a turn is sent to it, so a turn whose version has no worker stays queued
until one starts. A worker that still receives a turn of a session of another version (the session
moved on between submission and delivery) sends it on to that version's queue (agent/worker.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.core.config import AgentSettings, valid_version
from agent.session.record_store import event_log as record_event_log

if TYPE_CHECKING:
    from checkpointing.entry_log import EventLog

_START = frozenset({"run_start"})
_OVERRIDE = frozenset({"recovery_override"})


def version_queue(settings: AgentSettings, version: str) -> str:
    """The queue of one graph version's workers: `<workers.queue>.<version>`."""
    if not valid_version(version):
        raise ValueError(f"not a graph version: {version!r}")
    return f"{settings.workers.queue}.{version}"


def session_graph_version(settings: AgentSettings, tenant_id: str, session_id: str) -> str | None:
    """The graph version the session's latest run was checkpointed under (None: no run yet, or a
    run recorded without a readable version)."""
    return logged_graph_version(record_event_log(settings, tenant_id, session_id))


def logged_graph_version(log: EventLog) -> str | None:
    """`session_graph_version` of the session whose event log is `log`."""
    start = log.newest(_START)
    if start is None:
        return None
    run_id = start.payload.get("run_id")
    version = (start.payload.get("pins") or {}).get("graph_version")
    # A resume that accepted a graph change continues the run under the resuming process's version.
    for entry in log.entries(_OVERRIDE):  # rare: an operator's --accept-changes
        moved = (entry.payload.get("accepted") or {}).get("graph_version")
        if entry.payload.get("run_id") == run_id and isinstance(moved, dict):
            version = moved.get("now")
    return version if valid_version(version) else None


def turn_queue(settings: AgentSettings, tenant_id: str, session_id: str) -> str:
    """The queue a turn of this session is sent to (see the module's docstring)."""
    version = session_graph_version(settings, tenant_id, session_id)
    return settings.workers.queue if version is None else version_queue(settings, version)


__all__ = ["logged_graph_version", "session_graph_version", "turn_queue", "valid_version", "version_queue"]
