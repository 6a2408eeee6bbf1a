"""Reading sessions: list, show, graph state, result, archived tool results."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, DeltaChannelHistory
from langgraph.types import StateSnapshot

from agent.loop.tool_results import ToolResultSlice, ToolResultStore
from agent.results import RunResult, result_from_snapshot
from agent.session.session import ChatSession

if TYPE_CHECKING:
    from agent.run.core import RunnerCore


def sessions(rt: RunnerCore, tenant_id: str | None, user_id: str | None) -> list[ChatSession]:
    """The tenant's sessions (only the user's when given)."""
    tenant, user, _ = rt._ids(None, tenant_id, user_id)
    return rt.manager.list(tenant, user)


def show(rt: RunnerCore, session_id: str, tenant_id: str | None, user_id: str | None, last: int) -> dict[str, Any]:
    """Header, status, branches and the last entries of a session."""
    tenant, user, sid = rt._ids(session_id, tenant_id, user_id)
    session = rt.manager.get(tenant, sid, user)
    events = rt.manager.jsonl.event_log(tenant, sid)
    snap = head(rt, tenant, sid)
    return {
        "session": session.to_dict(),
        "header": events.header(),
        "branches": events.branches(),
        "checkpoint": {
            "checkpoint_id": (snap.config.get("configurable") or {}).get("checkpoint_id") if snap.config else None,
            "next": list(snap.next),
        },
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


class _WithoutHistory(BaseCheckpointSaver[Any]):
    """A read-only view of a saver that leaves every DeltaChannel empty instead of replaying its history.

    Which nodes run next depends on channel versions and trigger channels, never on the
    accumulated `messages` / `execution_history_text` / `tool_result_store`: a snapshot read
    through this view has the right `next`, `tasks`, `interrupts` and config, at a cost that does
    not grow with the session (its `values` lack those channels).
    """

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The inner saver's checkpoint tuple."""
        return self.inner.get_tuple(config)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """No history: every delta channel starts empty."""
        return {c: {"writes": []} for c in channels}


def head(rt: RunnerCore, tenant: str, sid: str) -> StateSnapshot:
    """The newest checkpoint's snapshot without the DeltaChannel values (see `_WithoutHistory`):
    for the questions about the tail (checkpoint id, next nodes, pending tasks and interrupts)."""
    thread = rt._thread(tenant, sid)
    light = {"configurable": {**thread["configurable"], CONFIG_KEY_CHECKPOINTER: _WithoutHistory(rt.saver)}}
    return rt.graph.get_state(cast(RunnableConfig, light))


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
