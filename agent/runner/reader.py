"""SessionReader: `show`, `pending_approvals` and `tool_result` without LangGraph, for the CLI.

`agentrt show`, `tool-result` and `doctor` run in a process of their own, which an `AgentRunner`
would spend most of its time starting (LangGraph, the compiled graph, the model, the SQL layer).
A reader answers from what the session keeps: the session document (through the session manager,
its SQL layer opened only when a read reaches it), the event log and the branch book, and the
checkpoint thread's records (`checkpointing.tail.ThreadTail`), with `agent.runner.views` building
the same answers the runner's `agent.runner.reading` builds.

`SessionReader.open` returns None when only a runner answers the command as it does today
(`agent.runner.readable`). A reader method
raises `NeedsGraph` when the checkpoint holds what only LangGraph reads exactly (see
`checkpointing.tail`); the caller then asks a runner, built with the reader's session manager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.runner.branches import head_of
from agent.runner.readable import RunnerFree
from agent.runner.views import archived_slice, branch_head, checked_ids, show_info
from checkpointing.tail import NeedsGraph, ThreadTail, interrupt_requests

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.tools.tool_results import ToolResultSlice

__all__ = ["NeedsGraph", "SessionReader"]

TOOL_RESULTS = "tool_result_store"


class SessionReader(RunnerFree):
    """Reads sessions as `AgentRunner.show` / `pending_approvals` / `tool_result` do (see the module doc)."""

    def __init__(self, settings: AgentSettings) -> None:
        from agent.session.record_store import store

        super().__init__(settings)
        self.store = store(settings)
        self.tail = ThreadTail(self.store, settings.session.tenant_id)

    def show(self, session_id: str, tenant_id: str | None, user_id: str | None, last: int = 15) -> dict[str, Any]:
        """`AgentRunner.show`."""
        tenant, user, sid = checked_ids(self.settings, session_id, tenant_id, user_id)
        session = self.manager.get(tenant, sid, user)
        events = self.manager.event_log(tenant, sid)
        at = head_of(self.tail, session)
        tail = self.tail.tail(tenant, sid, at.checkpoint_id)
        pending = interrupt_requests(tail.interrupts)
        return show_info(self.tail, session, events, tail.checkpoint_id, tail.next, pending, last)

    def pending_approvals(self, session_id: str, tenant_id: str | None, branch_id: str | None) -> list[dict[str, Any]]:
        """`AgentRunner.pending_approvals`."""
        tenant = tenant_id or self.settings.session.tenant_id
        has, checkpoint = self._checkpoint(tenant, session_id, branch_id)
        return interrupt_requests(self.tail.tail(tenant, session_id, checkpoint).interrupts) if has else []

    def tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        offset: int = 0,
        limit: int = 2000,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> ToolResultSlice:
        """`AgentRunner.tool_result`."""
        from agent.session.record_store import blobs

        tenant, user, sid = checked_ids(self.settings, session_id, tenant_id, user_id)
        self.manager.get(tenant, sid, user)  # tenant/user check
        has, checkpoint = self._checkpoint(tenant, sid, None)
        entries = self.tail.append_channel(tenant, sid, checkpoint, TOOL_RESULTS) if has else []
        return archived_slice(entries, blobs(self.settings), tool_call_id, offset, limit)

    def _checkpoint(self, tenant: str, session_id: str, branch_id: str | None) -> tuple[bool, str | None]:
        """Whether the branch has a checkpoint, and its id as `reading._branch_thread` addresses it
        (None: the thread's newest)."""
        at = branch_head(self.manager, self.tail, tenant, session_id, branch_id)
        if at is None:
            return True, None
        if at.checkpoint_id is None and not at.latest:
            return False, None
        return True, at.checkpoint_id
