"""Runner: what every run of a process shares, composed: the sessions (the session manager), the
graph and its saver, the lease a `Turn` holds, the runtime builder, the pins, and the chunk sink
the caller passed (the server's and the workers' `GraphChunks`; none on the CLI).

Its two ways into a run are parts of it: `starts` (`agent.runner.start.TurnStart`: a new turn) and
`resumes` (`agent.runner.resume.Resume`: recovery, then the stopped run continued); each opens a
`Turn` (`agent.runner.turn`) on the runner. `agent.runner.AgentRunner` holds a Runner and gives the
caller its public methods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agent.core import faults
from agent.core.config import AgentSettings
from agent.loop.models import build_chat_model
from agent.loop.surface import SurfacePins, compute_pins, skills_digest
from agent.runner.builder import RuntimeBuilder
from agent.runner.chunks import ChunkSink
from agent.runner.overrides import CONFIG_KEY as OVERRIDES_KEY
from agent.runner.overrides import applied
from agent.runner.overrides import encode as encode_overrides
from agent.runner.resume import Resume
from agent.runner.services import build_lease, build_manager, build_saver
from agent.runner.start import TurnStart
from agent.runner.turn import Turn
from agent.runner.views import checked_ids
from agent.session.item_store import TTL_CONFIG, item_store
from agent.session.manager import ChatSessionManager
from agent.session.record_store import blobs as record_blobs
from agent.session.session import ChatSession
from agent.session.tenant_store import LazyStore, TenantStore
from agent.tools.registry import build_toolset, toolset_descriptor
from checkpointing import layout
from graph.build import GRAPH_VERSION, build_graph
from graph.state import SCHEMA_VERSION


class Runner:
    """The parts of a runner: settings, toolset, saver, compiled graph, lease, sessions, pins, chunk sink.

    `chunks`: where the caller receives the graph's raw chunks (`agent.runner.chunks.ChunkSink`; None:
    only the run's own events). `sessions`: how the session manager is built (on first use; None:
    `build_manager` with `lazy_sql`).
    """

    def __init__(
        self,
        settings: AgentSettings,
        saver: BaseCheckpointSaver | None = None,
        *,
        chunks: ChunkSink | None = None,
        sessions: Callable[[AgentSettings], ChatSessionManager] | None = None,
    ) -> None:
        faults.install()
        self.settings = settings
        self.chunks = chunks
        self.tools = build_toolset(settings.tools)
        self.toolset = toolset_descriptor(self.tools)
        build_chat_model(settings.model)  # fail early on a bad model config / missing script
        self.blobs = record_blobs(settings)
        self.saver = saver if saver is not None else build_saver(settings)
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = build_graph(self.saver)
        self.lease = build_lease(settings)
        self._sessions = sessions
        self._manager: ChatSessionManager | None = None
        self.builder = RuntimeBuilder(settings, self.tools, self.blobs, self.saver)
        self.pins = compute_pins(settings, self.toolset, GRAPH_VERSION, skill=skills_digest(self.builder.skills))
        self._override_pins: dict[str, SurfacePins] = {}
        self.items = LazyStore(lambda: item_store(settings), TTL_CONFIG)
        """LangGraph's store of these settings (`agent.session.item_store`), opened when first used."""
        self.starts = TurnStart(self)
        """A new turn: `starts.stream(text, ...)`."""
        self.resumes = Resume(self)
        """A stopped run resumed: `resumes.stream(session_id, ...)`."""

    def graph_for(self, tenant_id: str) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The graph a run of `tenant_id` streams: its LangGraph store (`runtime.store`, and
        `langgraph.config.get_store()` in a tool) is that tenant's part of `items`."""
        return self.graph.copy({"store": TenantStore(self.items, tenant_id)})

    @property
    def manager(self) -> ChatSessionManager:
        """The session manager (opened on first use, so a bad input fails before touching storage)."""
        if self._manager is None:
            if self._sessions is not None:
                self._manager = self._sessions(self.settings)
            else:  # an embedded SQL layer opened on first use (`open_manager`)
                self._manager = build_manager(self.settings, lazy_sql=True)
        return self._manager

    @manager.setter
    def manager(self, manager: ChatSessionManager) -> None:
        """Use `manager` (e.g. one a reader already opened: what it read is not read again)."""
        self._manager = manager

    def turn(self, tenant_id: str, session_id: str) -> Turn:
        """A run of the session, to be entered (`with`): it holds the session's lease until it ends."""
        return Turn(self, tenant_id, session_id)

    def session_dir(self, tenant_id: str, session_id: str) -> Path:
        """`base_dir/tenants/<tenant>/sessions/<session>` (`layout.session_dir`: ids validated)."""
        return layout.session_dir(self.settings.base_dir, tenant_id, session_id)

    def ids(self, session_id: str | None, tenant_id: str | None, user_id: str | None) -> tuple[str, str | None, str]:
        """(tenant, user, session id) checked; a fresh session id when none is given."""
        return checked_ids(self.settings, session_id, tenant_id, user_id)

    def pins_for(self, overrides: Mapping[str, Any] | None) -> SurfacePins:
        """The pins of a run with these overrides (`agent.runner.overrides`): the runner's own without."""
        if not overrides:
            return self.pins
        key = encode_overrides(overrides)
        pins = self._override_pins.get(key)
        if pins is None:
            settings = applied(self.settings, overrides)
            pins = compute_pins(settings, self.toolset, GRAPH_VERSION, skill=skills_digest(self.builder.skills))
            self._override_pins[key] = pins
        return pins

    def run_config(
        self,
        session: ChatSession,
        run_id: str,
        token: int | None,
        overrides: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> RunnableConfig:
        """The LangGraph config of one run: thread, run identity, fencing token and the pins (those of
        the settings the run's `overrides` make, which the config carries too)."""
        settings = applied(self.settings, overrides or {})
        if overrides:
            extra[OVERRIDES_KEY] = encode_overrides(overrides)
        conf = {
            "thread_id": session.session_id,
            "tenant_id": session.tenant_id,
            "run_id": run_id,
            "agent_id": session.agent_id,
            "branch_id": session.current_branch_id,
            "turn": session.loop_count,
            "fencing_token": token,
            "state_schema_version": SCHEMA_VERSION,
            **self.pins_for(overrides).as_config(),
            **extra,
        }
        return {"configurable": conf, "recursion_limit": max(60, settings.loop.max_iterations * 8)}

    def thread(self, tenant: str, sid: str) -> RunnableConfig:
        """The config that names a session's thread (its newest checkpoint)."""
        return {"configurable": {"thread_id": sid, "tenant_id": tenant}}

    def checkpoint_doc(self, thread: RunnableConfig) -> dict[str, Any] | None:
        """The newest checkpoint's stored document (identity, pins), from any saver; None if none."""
        get_document = getattr(self.saver, "get_document", None)
        if get_document is not None:
            doc: dict[str, Any] | None = get_document(thread)
            return doc
        tup = self.saver.get_tuple(thread)
        if tup is None:
            return None
        meta = dict(tup.metadata or {})
        conf = tup.config.get("configurable") or {}
        return {
            "checkpoint_id": conf.get("checkpoint_id"),
            "tenant_id": meta.get("tenant_id", thread["configurable"]["tenant_id"]),
            "agent_id": meta.get("agent_id"),
            "branch_id": meta.get("branch_id"),
            "run_id": meta.get("run_id"),
            "graph_version": meta.get("graph_version"),
            "metadata": meta,
            "runtime_snapshot": {k: meta.get(k) for k in ("surface_digest", "toolset_hash")},
        }
