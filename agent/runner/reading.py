"""Reading sessions: list, show, graph state, result, archived tool results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, DeltaChannelHistory
from langgraph.types import StateSnapshot

from agent.core.results import RunResult, pending_approvals, result_from_snapshot
from agent.runner import views
from agent.runner.branches import head
from agent.runner.views import archived_slice, branch_head, show_info
from agent.session.session import ChatSession
from agent.tools.tool_results import ToolResultSlice
from checkpointing.entry_log import EventLog
from checkpointing.session_index import RowFilter

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner


def sessions(rt: Runner, tenant_id: str | None, user_id: str | None) -> list[ChatSession]:
    """The tenant's sessions (only the user's when given), oldest first, found by the index of sessions."""
    tenant, user, _ = rt.ids(None, tenant_id, user_id)
    found = [item.session for item in rt.manager.page(tenant, RowFilter(user_id=user), limit=None).items]
    return sorted(found, key=lambda s: (s.created_at, s.session_id))


def show(rt: Runner, session_id: str, tenant_id: str | None, user_id: str | None, last: int) -> dict[str, Any]:
    """Header, status, branches, the pending approvals (each with its `interrupt_id`) and the last entries."""
    tenant, user, sid = rt.ids(session_id, tenant_id, user_id)
    session = rt.manager.get(tenant, sid, user)
    events = rt.manager.event_log(tenant, sid)
    at = head(rt, session)  # the current branch's checkpoint, not the thread's newest
    snap = light_snapshot(rt, at.config(tenant, sid))
    checkpoint_id = (snap.config.get("configurable") or {}).get("checkpoint_id") if snap.config else None
    return show_info(rt.saver, session, events, checkpoint_id, list(snap.next), pending_approvals(snap), last)


class _WithoutHistory(BaseCheckpointSaver[Any]):
    """A read-only view of a saver that leaves every DeltaChannel empty instead of replaying its history.

    Which nodes run next depends on channel versions and trigger channels, never on the
    accumulated `messages` / `execution_history_text` / `tool_result_store`: a snapshot read
    through this view has the right `next`, `tasks`, `interrupts` and config, at a cost that does
    not grow with the session (its `values` lack those channels).
    """

    def __init__(self, inner: BaseCheckpointSaver[Any], keep: frozenset[str] = frozenset()) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.keep = keep
        """The delta channels whose history is still replayed (e.g. `tool_result_store` alone)."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The inner saver's checkpoint tuple."""
        return self.inner.get_tuple(config)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """No history (but for the `keep` channels): every other delta channel starts empty."""
        kept = [c for c in channels if c in self.keep]
        out: dict[str, DeltaChannelHistory] = {c: {"writes": []} for c in channels if c not in self.keep}
        if kept:
            out.update(self.inner.get_delta_channel_history(config=config, channels=kept))
        return out


def light_snapshot(rt: Runner, config: RunnableConfig, keep: frozenset[str] = frozenset()) -> StateSnapshot:
    """The snapshot at `config` without the DeltaChannel values but `keep` (see `_WithoutHistory`):
    for the questions about the tail (checkpoint id, next nodes, pending tasks and interrupts)."""
    conf = {**(config.get("configurable") or {}), CONFIG_KEY_CHECKPOINTER: _WithoutHistory(rt.saver, keep)}
    return rt.graph.get_state(cast(RunnableConfig, {**config, "configurable": conf}))


def state(rt: Runner, session_id: str, tenant_id: str | None, branch_id: str | None = None) -> dict[str, Any]:
    """The graph state of a session's branch (default: its current one; {} if none)."""
    tenant = tenant_id or rt.settings.session.tenant_id
    thread = _branch_thread(rt, tenant, session_id, branch_id)
    return {} if thread is None else dict(rt.graph.get_state(thread).values or {})


def result(rt: Runner, session_id: str, tenant_id: str | None, config: RunnableConfig | None = None) -> RunResult:
    """The state at `config` (default: the thread's newest checkpoint) summarized as a RunResult."""
    tenant = tenant_id or rt.settings.session.tenant_id
    return result_from_snapshot(session_id, rt.graph.get_state(config or rt.thread(tenant, session_id)))


def branch_result(rt: Runner, session_id: str, tenant_id: str | None, branch_id: str | None) -> RunResult:
    """The state of a session's branch (default: its current one) summarized as a RunResult."""
    tenant = tenant_id or rt.settings.session.tenant_id
    thread = _branch_thread(rt, tenant, session_id, branch_id)
    if thread is None:
        return RunResult(session_id=session_id, run_id="", answer="", status="UNKNOWN", finish_reason=None)
    return result(rt, session_id, tenant, thread)


def branch_pending_approvals(
    rt: Runner, session_id: str, tenant_id: str | None, branch_id: str | None
) -> list[dict[str, Any]]:
    """The approvals a branch's stopped run waits for (default: the current branch), read from the
    tail (`light_snapshot`): the same as `branch_result(...).pending_approval` without its messages."""
    tenant = tenant_id or rt.settings.session.tenant_id
    thread = _branch_thread(rt, tenant, session_id, branch_id)
    return [] if thread is None else pending_approvals(light_snapshot(rt, thread))


def _branch_thread(rt: Runner, tenant: str, session_id: str, branch_id: str | None) -> RunnableConfig | None:
    """The config of a branch's checkpoint; None when the branch has none (the thread's newest is another's)."""
    at = branch_head(rt.manager, rt.saver, tenant, session_id, branch_id)
    if at is None:  # a thread without a session record (e.g. a bare saver): its newest checkpoint
        return rt.thread(tenant, session_id)
    if at.checkpoint_id is None and not at.latest:
        return None
    return at.config(tenant, session_id)


def branch_info(rt: Runner, session: ChatSession, events: EventLog) -> list[dict[str, Any]]:
    """Each branch: where it forked, its room, its checkpoint and its page history (from the log alone)."""
    return views.branch_info(rt.saver, session, events)


def tool_result(
    rt: Runner,
    session_id: str,
    tool_call_id: str,
    offset: int,
    limit: int,
    tenant_id: str | None,
    user_id: str | None,
) -> ToolResultSlice:
    """A page of an archived tool result of a session (what `read_tool_result` gives the model)."""
    tenant, user, sid = rt.ids(session_id, tenant_id, user_id)
    rt.manager.get(tenant, sid, user)  # tenant/user check
    thread = _branch_thread(rt, tenant, sid, None)
    # Only the archive's own channel is replayed: the messages are not decoded to read one result.
    snap = None if thread is None else light_snapshot(rt, thread, frozenset({"tool_result_store"}))
    entries = list(((snap.values or {}) if snap is not None else {}).get("tool_result_store") or [])
    return archived_slice(entries, rt.blobs, tool_call_id, offset, limit)
