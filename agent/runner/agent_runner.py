"""AgentRunner: the Python API (and what the CLI calls): run / stream / resume / pause / end / fork.

One runner per process is the norm. Each run holds the session lease (fenced), records its
events in the session's event tree, writes checkpoints with `durability="sync"` (a checkpoint is
on disk before the next step starts) and goes through the tool journal, so a crash at any point
resumes with `resume()` to the result an uncrashed run would have had.

This class holds an `agent.runner.base_runner.Runner` (the parts a run composes: `runner`) and
gives the caller its methods: a new turn goes to `runner.starts`, a resume to `runner.resumes`,
the others to one module of `agent.runner` each (see its docstring). A caller that wants the graph's
raw chunks too passes a sink, `AgentRunner(settings, chunks=GraphChunks())` (`agent.runner.chunks`),
as the server and the Celery workers do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agent.core.config import AgentSettings, load_settings
from agent.core.results import RunEvent, RunResult
from agent.core.tool_spec import ToolSpec
from agent.loop.surface import SurfacePins
from agent.runner import branch_ops, reading
from agent.runner import run_lifecycle as lifecycle
from agent.runner.base_runner import Runner
from agent.runner.builder import RuntimeBuilder
from agent.runner.chunks import GRAPH_EVENT, ChunkSink, GraphChunks, clean_stop
from agent.runner.options import RunOptions
from agent.runner.services import build_saver
from agent.runner.streaming import final, in_thread
from agent.session.lease import SessionLease
from agent.session.manager import ChatSessionManager
from agent.session.session import ChatSession
from agent.session.tenant_store import LazyStore
from agent.tools.tool_results import ToolResultSlice
from checkpointing.blobs import Blobs

if TYPE_CHECKING:
    from agent.runner.submit import TurnHandle

__all__ = [
    "GRAPH_EVENT",
    "AgentRunner",
    "ChunkSink",
    "GraphChunks",
    "RunEvent",
    "RunResult",
    "build_saver",
    "clean_stop",
]


class AgentRunner:
    """Runs agent turns for sessions, and resumes, pauses, ends and forks them.

    It holds a `Runner` (`runner`: settings, saver, graph, lease, sessions) and adds no behaviour of
    its own, only the names a caller uses. `chunks`: where the caller receives the graph's raw
    chunks (None: only the run's own events); `sessions`: how the session manager is built.
    """

    def __init__(
        self,
        settings: AgentSettings,
        saver: BaseCheckpointSaver | None = None,
        *,
        chunks: ChunkSink | None = None,
        sessions: Callable[[AgentSettings], ChatSessionManager] | None = None,
    ) -> None:
        self.runner = Runner(settings, saver, chunks=chunks, sessions=sessions)

    @property
    def settings(self) -> AgentSettings:
        """The runner's settings."""
        return self.runner.settings

    @property
    def saver(self) -> BaseCheckpointSaver:
        """The checkpoint saver the graph writes to."""
        return self.runner.saver

    @property
    def graph(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The compiled agent graph."""
        return self.runner.graph

    @property
    def manager(self) -> ChatSessionManager:
        """The session manager (opened on first use)."""
        return self.runner.manager

    @manager.setter
    def manager(self, manager: ChatSessionManager) -> None:
        """Use `manager` (e.g. one a reader already opened)."""
        self.runner.manager = manager

    @property
    def lease(self) -> SessionLease:
        """The session lease each run holds."""
        return self.runner.lease

    @property
    def blobs(self) -> Blobs:
        """The blob store of large values (tool results, files)."""
        return self.runner.blobs

    @property
    def pins(self) -> SurfacePins:
        """The runner's pins (graph version, toolset and settings digests)."""
        return self.runner.pins

    @property
    def builder(self) -> RuntimeBuilder:
        """What builds each run's LoopRuntime (skills, tools, room)."""
        return self.runner.builder

    @property
    def tools(self) -> dict[str, ToolSpec]:
        """The toolset, by name."""
        return self.runner.tools

    @property
    def toolset(self) -> list[dict[str, Any]]:
        """The toolset's descriptor (names, shapes, permissions) the pins are computed from."""
        return self.runner.toolset

    @property
    def items(self) -> LazyStore:
        """LangGraph's store of these settings, opened when first used."""
        return self.runner.items

    def checkpoint_doc(self, thread: RunnableConfig) -> dict[str, Any] | None:
        """The newest checkpoint's stored document of a thread (identity, pins); None if none."""
        return self.runner.checkpoint_doc(thread)

    def session_dir(self, tenant_id: str, session_id: str) -> Path:
        """`base_dir/tenants/<tenant>/sessions/<session>` (ids validated)."""
        return self.runner.session_dir(tenant_id, session_id)

    @classmethod
    def from_config(cls, path: str | Path | None = None, **overrides: Any) -> AgentRunner:
        """Build a runner from a YAML config (None: the built-in defaults)."""
        return cls(load_settings(path, overrides=overrides or None))

    # --- a new turn ----------------------------------------------------------------------------------
    def stream(
        self,
        text: str,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        skill: str | None = None,
        *,
        new_session_id: str | None = None,
        options: RunOptions | None = None,
    ) -> Iterator[RunEvent]:
        """Run one turn, yielding events as they happen; the last event is `final` with the result.

        `session_id` continues that session: it must exist for the tenant (and user), else
        `SessionNotFound`. Without it the turn starts a new session, with the id `new_session_id`
        when given (`SessionExists` if the tenant has it already) or a generated one. `options`:
        breakpoints, and a turn over a stopped run (`agent.runner.options.RunOptions`).
        """
        return self.runner.starts.stream(text, session_id, tenant_id, user_id, skill, new_session_id, options)

    def run(
        self,
        text: str,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        skill: str | None = None,
        *,
        new_session_id: str | None = None,
    ) -> RunResult:
        """Run one turn until it ends or pauses (status PAUSED: a tool awaits approval) and return the result.

        The session rules are those of `stream`: `session_id` must exist; `new_session_id` names a new one.
        Nothing is streamed while it runs (`RunOptions.live_events`): each node runs in the calling thread.
        """
        return final(
            self.stream(
                text,
                session_id=session_id,
                tenant_id=tenant_id,
                user_id=user_id,
                skill=skill,
                new_session_id=new_session_id,
                options=RunOptions(live_events=False),
            )
        )

    async def astream(self, text: str, **kwargs: Any) -> AsyncIterator[RunEvent]:
        """`stream` for asyncio code: the run proceeds in a worker thread, never blocking the event loop."""
        async for ev in in_thread(lambda: self.stream(text, **kwargs)):
            yield ev

    # --- resume ----------------------------------------------------------------------------------------
    def resume(
        self,
        session_id: str,
        tenant_id: str | None = None,
        user_id: str | None = None,
        decision: dict[str, Any] | None = None,
        accept_changes: tuple[str, ...] | list[str] = (),
        operator: str | None = None,
        reason: str | None = None,
        interrupt_id: str | None = None,
    ) -> RunResult:
        """Recover and continue a crashed, paused or interrupted run to its end.

        `decision` ({"approved": bool, "reason": ...}) answers the pending approval `interrupt_id`
        names (`RunResult.pending_approval[i]["interrupt_id"]`; None: the only one pending). When
        that approval is no longer pending it raises `ApprovalNotPending` and changes nothing.
        """
        return final(
            self.stream_resume(
                session_id,
                tenant_id,
                user_id,
                decision,
                accept_changes,
                operator,
                reason,
                interrupt_id,
                RunOptions(live_events=False),
            )
        )

    def stream_resume(
        self,
        session_id: str,
        tenant_id: str | None = None,
        user_id: str | None = None,
        decision: dict[str, Any] | None = None,
        accept_changes: tuple[str, ...] | list[str] = (),
        operator: str | None = None,
        reason: str | None = None,
        interrupt_id: str | None = None,
        options: RunOptions | None = None,
    ) -> Iterator[RunEvent]:
        """`resume` as a stream: a `recovered` event first, then the run's events, then `final`
        (`options`: breakpoints for the continued run)."""
        return self.runner.resumes.stream(
            session_id, tenant_id, user_id, decision, accept_changes, operator, reason, interrupt_id, options
        )

    async def astream_resume(self, session_id: str, **kwargs: Any) -> AsyncIterator[RunEvent]:
        """`stream_resume` for asyncio code (a worker thread drives the run)."""
        async for ev in in_thread(lambda: self.stream_resume(session_id, **kwargs)):
            yield ev

    # --- lifecycle ---------------------------------------------------------------------------------------
    def pause(self, session_id: str, tenant_id: str | None = None, user_id: str | None = None) -> ChatSession:
        """Mark the session PAUSED: plain turns are refused until `resume` (or end + fork)."""
        return lifecycle.pause(self.runner, session_id, tenant_id, user_id)

    def end(self, session_id: str, tenant_id: str | None = None, user_id: str | None = None) -> ChatSession:
        """Mark the session ENDED (no new turns; forking a branch reopens it)."""
        return lifecycle.end(self.runner, session_id, tenant_id, user_id)

    def fork(
        self, session_id: str, from_entry_id: str, tenant_id: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        """Start a branch at an earlier entry; the next turn continues from that entry's checkpoint."""
        return lifecycle.fork(self.runner, session_id, from_entry_id, tenant_id, user_id)

    def branches(
        self, session_id: str, tenant_id: str | None = None, user_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The session's live branches, main first: id, name, fork point, head entry, turns, current."""
        return branch_ops.branches(self.runner, session_id, tenant_id, user_id)

    def switch(
        self, session_id: str, branch: str, tenant_id: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        """Make `branch` (id or name) current: the next turn continues its leaf, room and checkpoints."""
        return branch_ops.switch(self.runner, session_id, branch, tenant_id, user_id)

    def rename_branch(
        self, session_id: str, branch: str, name: str, tenant_id: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        """Name `branch` (id or name); the name is accepted wherever a branch id is."""
        return branch_ops.rename(self.runner, session_id, branch, name, tenant_id, user_id)

    def delete_branch(
        self, session_id: str, branch: str, tenant_id: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        """Take `branch` (not main, not the current one) out of every listing; its entries stay."""
        return branch_ops.delete(self.runner, session_id, branch, tenant_id, user_id)

    # --- workers -------------------------------------------------------------------------------------------
    def submit(
        self,
        text: str,
        session_id: str,
        tenant_id: str | None = None,
        user_id: str | None = None,
        turn_id: str | None = None,
        *,
        new_session: bool = False,
    ) -> TurnHandle:
        """Queue a turn for the Celery workers (`workers.broker_url`); `.wait()` / `.status()` follow it.

        `session_id` must exist, unless `new_session` (then it must not: the turn creates it).
        """
        from agent.runner.submit import submit_turn

        return submit_turn(self.settings, text, session_id, tenant_id, user_id, turn_id, new_session=new_session)

    def submit_decision(
        self,
        session_id: str,
        decision: dict[str, Any],
        tenant_id: str | None = None,
        interrupt_id: str | None = None,
    ) -> TurnHandle:
        """Approve or reject a submitted turn that paused for approval (the one `interrupt_id` names);
        a worker continues it."""
        from agent.runner.submit import submit_decision

        return submit_decision(self.settings, session_id, decision, tenant_id, interrupt_id=interrupt_id)

    # --- reading -------------------------------------------------------------------------------------------
    def sessions(self, tenant_id: str | None = None, user_id: str | None = None) -> list[ChatSession]:
        """The tenant's sessions (only the user's when given)."""
        return reading.sessions(self.runner, tenant_id, user_id)

    def show(
        self, session_id: str, tenant_id: str | None = None, user_id: str | None = None, last: int = 15
    ) -> dict[str, Any]:
        """Header, status, branches, pending approvals (with their `interrupt_id`) and the last entries."""
        return reading.show(self.runner, session_id, tenant_id, user_id, last)

    def state(self, session_id: str, tenant_id: str | None = None, branch_id: str | None = None) -> dict[str, Any]:
        """The graph state of a session's branch (default: its current branch; {} if none)."""
        return reading.state(self.runner, session_id, tenant_id, branch_id)

    def result(self, session_id: str, tenant_id: str | None = None, branch_id: str | None = None) -> RunResult:
        """Summarize the state of a session's branch (default: its current branch) as a RunResult."""
        return reading.branch_result(self.runner, session_id, tenant_id, branch_id)

    def pending_approvals(
        self, session_id: str, tenant_id: str | None = None, branch_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The approvals a branch's stopped run waits for (default: the current branch), each with its
        `interrupt_id`; read from the tail of the history, not its messages."""
        return reading.branch_pending_approvals(self.runner, session_id, tenant_id, branch_id)

    def tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        offset: int = 0,
        limit: int = 2000,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> ToolResultSlice:
        """Page through an archived tool result of a session (what `read_tool_result` gives the model)."""
        return reading.tool_result(self.runner, session_id, tool_call_id, offset, limit, tenant_id, user_id)
