"""Which checkpoint a branch is at, and each branch's room and page history.

A session's LangGraph thread holds the checkpoints of every branch. The checkpoint that belongs to
the branch being run is its head: the newest checkpoint whose metadata names that branch, or, for
a branch that has not written one yet, the checkpoint it was forked from. Recovery, "refuse an
unfinished run", `show` and the doctor read that checkpoint, never just the thread's newest one (a
paused run left on an abandoned branch must not leak into a fork).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.session.session import MAIN_BRANCH, ChatSession
from agent.session.stores.jsonl import page_messages
from checkpointing.entry_log import EventLog
from checkpointing.layout import room_path

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from agent.runner.base_runner import Runner


@dataclass(frozen=True)
class BranchHead:
    """Where a branch stands in the session's checkpoint thread."""

    branch_id: str
    checkpoint_id: str | None
    """The branch's checkpoint (None: the session has no checkpoint at all)."""
    own: bool
    """Whether the branch wrote that checkpoint (False: the fork point of a branch not run yet)."""
    latest: bool
    """Whether it is also the thread's newest checkpoint (then LangGraph needs no explicit id)."""

    def config(self, tenant_id: str, session_id: str) -> RunnableConfig:
        """The thread config addressed at this checkpoint."""
        conf: dict[str, Any] = {"thread_id": session_id, "tenant_id": tenant_id}
        if self.checkpoint_id is not None:
            conf["checkpoint_id"] = self.checkpoint_id
        return {"configurable": conf}

    def run_extra(self) -> dict[str, Any]:
        """What a run's config needs to continue from here: the id, unless it is the thread's newest."""
        return {} if self.latest or self.checkpoint_id is None else {"checkpoint_id": self.checkpoint_id}


def head_of(
    saver: Any, session: ChatSession, branch_id: str | None = None, fork_point: str | None = None
) -> BranchHead:
    """The head of `branch_id` (default: the session's current branch), read through `saver`'s
    `get_tuple` and `list` (a LangGraph saver, or `checkpointing.tail.ThreadTail`).

    `fork_point`: the checkpoint the branch was forked from, when the caller read it from the
    branch's `branch_created` entry (the session keeps it too for branches forked since).
    """
    branch = branch_id or session.current_branch_id
    thread: RunnableConfig = {"configurable": {"thread_id": session.session_id, "tenant_id": session.tenant_id}}
    newest = saver.get_tuple(thread)
    latest_id = _cp_id(newest.config) if newest is not None else None
    if newest is not None and (newest.metadata or {}).get("branch_id", MAIN_BRANCH) == branch:
        return BranchHead(branch, latest_id, True, True)
    found = next(iter(saver.list(thread, filter={"branch_id": branch}, limit=1)), None)
    if found is not None:
        cp = _cp_id(found.config)
        return BranchHead(branch, cp, True, cp == latest_id)
    fork_cp = _fork_checkpoint(session, branch) or fork_point
    if fork_cp is not None:
        return BranchHead(branch, fork_cp, False, fork_cp == latest_id)
    if branch == MAIN_BRANCH:  # a main branch whose checkpoints name no branch: the thread is its own
        return BranchHead(branch, latest_id, latest_id is not None, True)
    return BranchHead(branch, None, False, latest_id is None)


def _fork_checkpoint(session: ChatSession, branch: str) -> str | None:
    points = session.context.get("fork_points") or {}
    cp = points.get(branch) if isinstance(points, dict) else None
    if cp is None and branch == session.current_branch_id:
        cp = session.context.get("fork_checkpoint_id")
    return str(cp) if cp else None


def _cp_id(config: RunnableConfig) -> str | None:
    cp = (config.get("configurable") or {}).get("checkpoint_id")
    return str(cp) if cp else None


def head(rt: Runner, session: ChatSession, branch_id: str | None = None, fork_point: str | None = None) -> BranchHead:
    """`head_of` with the runner's saver."""
    return head_of(rt.saver, session, branch_id, fork_point)


def fork_point_of(events: EventLog, branch_id: str) -> str | None:
    """The checkpoint a branch was forked from, as its `branch_created` entry records it (None: main/unknown)."""
    stat = events.branch_stats().get(branch_id)
    if stat is None:
        return None
    first = events.entry(stat[0])  # only the branch's first entry is parsed
    if first.type != "branch_created":
        return None
    cp = first.payload.get("checkpoint_id")
    return str(cp) if cp else None


def room_name(branch_id: str) -> str:
    """The room directory of a branch, relative to the session directory."""
    return str(room_path(branch_id))


def room_id(branch_id: str) -> str:
    """The id of a branch's room (its directory name, as `Sandbox.room_id` gives it)."""
    return room_path(branch_id).name


def set_room(session: ChatSession) -> None:
    """Point the session's `room_id` at its current branch's room (the workspace stays relative to it)."""
    session.room_id = room_id(session.current_branch_id)
    if not session.sandbox_workspace:
        session.sandbox_workspace = "."


def branch_pages(events: EventLog) -> dict[str, list[dict[str, Any]]]:
    """Every branch's page history rebuilt from the event log alone: {branch: [{role, content, entry_id}]}.

    A branch's history is the path from its newest entry to the root, so a fork shows the turns it
    inherited before its own. Texts come from the entries (inline, or the blob they reference).
    """
    return {
        branch: [{"role": m.role, "content": m.content, "entry_id": m.entry_id} for m in page_messages(events, leaf)]
        for branch, leaf in events.branches().items()
    }
