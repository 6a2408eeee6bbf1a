"""How far behind the SQL and Redis layers are, from the sessions' outboxes (read-only).

- `lag_lines`: one line per owed layer of a session ("SQL is behind: 3 unpaid changes since
  <time>; they replay when PostgreSQL answers, or run `agentrt doctor ID --repair`"), what the
  `session_found` check reports;
- `outbox_check`: `agentrt doctor` without a session id: the tenant's sessions whose outbox owes
  anything, found through the outbox's markers (one folder read, never a walk of every session).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.core.errors import AgentrtError, quote_id
from agent.doctor.facts import Check
from agent.doctor.finding import finding

if TYPE_CHECKING:
    from agent.doctor.subject import RuntimeParts
    from agent.session.manager import ChatSessionManager
    from agent.session.outbox import Lag

NAME = "outbox"
SHOWN = 20
"""At most this many sessions are named by `outbox_check` (the count covers them all)."""


def server_of(manager: ChatSessionManager, layer: str) -> str:
    """What a user calls the server behind `layer` ("PostgreSQL", "Redis", ...)."""
    if layer == "L2":
        return "Redis"
    url = manager.sql.url if manager.sql is not None else ""
    if url.startswith("postgresql"):
        return "PostgreSQL"
    return "the SQL database"


def lag_lines(manager: ChatSessionManager, session_id: str, behind: dict[str, Lag]) -> list[str]:
    """One line per layer the session's outbox says is behind."""
    sid = quote_id(session_id)
    out = []
    for layer, lag in behind.items():
        since = f" since {lag.since}" if lag.since else ""
        changes = "1 unpaid change" if lag.changes == 1 else f"{lag.changes} unpaid changes"
        out.append(
            f"{layer} is behind: {changes}{since}; they replay when {server_of(manager, layer)} answers, "
            f"or run `agentrt doctor {sid} --repair`"
        )
    return out


def outbox_check(parts: RuntimeParts, tenant_id: str) -> Check:
    """The tenant's sessions whose outbox owes a layer writes (from the markers, no walk)."""
    manager = parts.manager
    try:
        due = manager.outbox.due(tenant_id)
    except (AgentrtError, OSError) as err:
        return finding(NAME, "WARN", f"the sessions owing writes could not be listed: {err}", "check base_dir")
    if not due:
        return finding(NAME, "OK", "no session owes the SQL or Redis layer a write", "nothing to do")
    sessions: dict[str, dict[str, dict[str, object]]] = {}
    for sid in due[:SHOWN]:
        try:
            behind = manager.outbox.behind(tenant_id, sid)
        except (AgentrtError, OSError) as err:
            sessions[sid] = {"outbox": {"unreadable": str(err)}}
            continue
        sessions[sid] = {layer: {"changes": lag.changes, "since": lag.since} for layer, lag in behind.items()}
    layers = sorted({layer for by_layer in sessions.values() for layer in by_layer if layer != "outbox"})
    servers = " / ".join(dict.fromkeys(server_of(manager, layer) for layer in layers)) or "the layer"
    more = f" (the first {SHOWN} shown)" if len(due) > SHOWN else ""
    return finding(
        NAME,
        "WARN",
        f"{len(due)} session(s) owe {', '.join(layers) or 'a layer'} writes missed in an outage{more}",
        f"they replay when {servers} answers (the next use of the session, a running worker or `agentrt serve` "
        "within session.converge_every_s); `agentrt store converge` replays them all now, "
        "`agentrt doctor ID` tells how far behind one is",
        sessions=sessions,
    )
