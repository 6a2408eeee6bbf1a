"""Reading sessions: list, show, graph state, result, archived tool results."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent.loop.tool_results import ToolResultSlice, ToolResultStore
from agent.results import RunResult, pending_approvals, result_from_snapshot
from agent.session.session import ChatSession

if TYPE_CHECKING:
    from agent.run.core import RunnerCore


def sessions(rt: RunnerCore, tenant_id: str | None, user_id: str | None) -> list[ChatSession]:
    """The tenant's sessions (only the user's when given)."""
    tenant, user, _ = rt._ids(None, tenant_id, user_id)
    return rt.manager.list(tenant, user)


def show(rt: RunnerCore, session_id: str, tenant_id: str | None, user_id: str | None, last: int) -> dict[str, Any]:
    """Header, status, branches, the pending approvals (each with its `interrupt_id`) and the last entries."""
    tenant, user, sid = rt._ids(session_id, tenant_id, user_id)
    session = rt.manager.get(tenant, sid, user)
    events = rt.manager.jsonl.event_log(tenant, sid)
    snap = rt.graph.get_state(rt._thread(tenant, sid))
    return {
        "session": session.to_dict(),
        "header": events.header(),
        "branches": events.branches(),
        "checkpoint": {
            "checkpoint_id": (snap.config.get("configurable") or {}).get("checkpoint_id") if snap.config else None,
            "next": list(snap.next),
        },
        "pending_approvals": pending_approvals(snap),
        "entries": [
            {
                "id": e.id,
                "parent_id": e.parent_id,
                "branch_id": e.branch_id,
                "type": e.type,
                "ts": e.ts,
                "summary": _summary(e.payload),
            }
            for e in events.last(last)
        ],
    }


def state(rt: RunnerCore, session_id: str, tenant_id: str | None) -> dict[str, Any]:
    """The latest graph state of a session ({} if none)."""
    tenant = tenant_id or rt.settings.session.tenant_id
    return dict(rt.graph.get_state(rt._thread(tenant, session_id)).values or {})


def result(rt: RunnerCore, session_id: str, tenant_id: str | None) -> RunResult:
    """The session's latest state summarized as a RunResult."""
    tenant = tenant_id or rt.settings.session.tenant_id
    return result_from_snapshot(session_id, rt.graph.get_state(rt._thread(tenant, session_id)))


def tool_result(
    rt: RunnerCore,
    session_id: str,
    tool_call_id: str,
    offset: int,
    limit: int,
    tenant_id: str | None,
    user_id: str | None,
) -> ToolResultSlice:
    """A page of an archived tool result of a session (what `read_tool_result` gives the model)."""
    tenant, user, sid = rt._ids(session_id, tenant_id, user_id)
    rt.manager.get(tenant, sid, user)  # tenant/user check
    entries = list(state(rt, sid, tenant).get("tool_result_store") or [])
    return ToolResultStore.from_entries(entries, rt.blobs).read(tool_call_id, offset, limit)


def _summary(payload: Mapping[str, Any] | None) -> str:
    if not payload:
        return ""
    text = json.dumps({k: v for k, v in payload.items() if k != "content"}, ensure_ascii=False, default=str)
    return text if len(text) <= 160 else text[:157] + "..."
