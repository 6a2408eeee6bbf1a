"""The doctor's `worker_queue` check (run when a task broker is configured): the graph version a
session runs on, and its turns that wait for a worker of that version (a rolling upgrade left them
on a version no worker runs any more).

Read-only: the session's event log (its newest `run_start`, agent/routing.py) and its inbox.
"""

from __future__ import annotations

from agent.doctor.facts import Check, SessionFacts
from agent.doctor.files import finding
from agent.routing import session_graph_version, version_queue
from agent.session.inbox import Inbox, TurnStatus

NAME = "worker_queue"
UPGRADE = "see 'Rolling upgrade' in docs/production.md"


def worker_queue(f: SessionFacts) -> Check:
    """OK unless turns of a session of another graph version than this agentrt's wait for a worker (WARN)."""
    settings = f.runner.settings
    found = session_graph_version(settings, f.tenant_id, f.session_id)
    own = f.runner.pins.graph_version
    if found is None:
        return finding(
            NAME, "OK", f"no run yet: its turns go to queue {settings.workers.queue}, for any worker", "nothing to do"
        )
    queue = version_queue(settings, found)
    turns = Inbox(settings.base_dir, f.tenant_id, f.session_id).turns()
    waiting = [t.turn_id for t in turns if t.status in (TurnStatus.PENDING, TurnStatus.RUNNING)]
    where = {"graph_version": found, "this_agentrt": own, "queue": queue, "waiting": waiting}
    if found == own or not waiting:
        said = "this agentrt's" if found == own else f"not this agentrt's ({own})"
        summary = f"runs on graph version {found}, {said}; its turns go to queue {queue}"
        return finding(NAME, "OK", summary, "nothing to do", **where)
    return finding(
        NAME,
        "WARN",
        f"{len(waiting)} unfinished turn(s) run only on a worker of graph version {found}, from queue {queue} "
        f"(this agentrt: {own})",
        f"keep (or start) a worker of graph version {found} until they ran, or let the new workers take the "
        f"session over (workers.adopt_graph_versions: [{found}]); {UPGRADE}",
        **where,
    )
