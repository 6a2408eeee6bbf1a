"""What every route shares: the runner, the run engine, auth, and threads read as agentrt sessions.

A thread is a session of the caller's tenant (and user, when the key names one); its state is the
session's checkpoint on its current branch (the fork point until a forked branch has run), and its
history holds every branch of the thread (agent/serve/thread_history.py).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from agent.core.config import AgentSettings
from agent.core.errors import ConfigError, SessionNotFound, quote_id
from agent.core.statuses import RunStatus
from agent.runner.celery_app import celery_config
from agent.runner.live import redis_url
from agent.runner.turns import SessionHold
from agent.serve.assistants import ASSISTANT_ID, GRAPH_ID, AssistantStore
from agent.serve.auth import Authenticator, Principal
from agent.serve.encode import empty_state, jsonable
from agent.serve.engine import RunEngine
from agent.serve.head_values import HeadValues
from agent.serve.run_record import RunRecord
from agent.serve.serve_runner import serve_runner
from agent.session.session import THREAD_METADATA, ChatSession
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id
from checkpointing.session_index import SessionRow

METADATA_KEY = THREAD_METADATA


def thread_status_of(live: bool, last_run_status: str | None) -> str:
    """idle / busy / interrupted / error, from whether a run is going here and the newest run's status."""
    if live:
        return "busy"
    if last_run_status in (RunStatus.FAILED, RunStatus.RECOVERY_BLOCKED):
        return "error"
    # RUNNING with no live run here: killed mid-run (or running elsewhere); resumable either way.
    if last_run_status in (RunStatus.PAUSED, RunStatus.RUNNING, RunStatus.INTERRUPTED):
        return "interrupted"
    return "idle"


class ServeContext:
    """The server's shared parts; one per app."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.auth = Authenticator(settings)
        self.runner = serve_runner(settings)
        self.parts = self.runner.runner
        """The runner's parts (`agent.runner.base_runner.Runner`): what a rollback forks with and
        what the session upkeep (deleting a thread, the sweep) is handed."""
        self.on_workers = settings.serve.on_workers(settings.workers)
        """Runs go to the Celery workers (`serve.runs_on`), else they run in this process."""
        self.engine = RunEngine(self.runner, settings.serve.run_threads, self._roll_back, self.on_workers)
        if self.on_workers:
            celery_config(settings)  # no broker: say so at start, not at the first run
            redis_url(settings)
        self.items = self.runner.items.store
        """LangGraph's store (`agent.session.item_store`), opened and set up now: the store routes
        and the graphs of this server's runs read it, each through its tenant's `TenantStore`."""
        self.head_values = HeadValues(self.runner.graph)
        """Threads' values and interrupts as JSON, kept by head checkpoint (agent/serve/head_values.py)."""
        self.started_at = time.time()
        self.assistants = AssistantStore(settings, self.items, self.started_at)
        """The built-in assistant and the tenants' own (`agent.serve.assistants`)."""

    def _roll_back(self, rec: RunRecord) -> bool:
        from agent.serve.rollback import roll_back  # it deletes threads: thread_ops needs this module

        return roll_back(self, rec)

    # --- ids and sessions ------------------------------------------------------------------------
    def run_assistant(self, principal: Principal, assistant_id: str) -> tuple[str, dict[str, Any]]:
        """The assistant a run names (its id, and the overrides its runs apply); 404 when the
        caller's tenant has none by this id, 422 when its config no longer fits this server."""
        return self.assistants.overrides(principal.tenant_id, assistant_id)

    def session(self, principal: Principal, thread_id: str) -> ChatSession:
        """The thread's session as this caller may see it (`SessionNotFound` otherwise, also for bad ids)."""
        try:
            validate_id(thread_id, "thread id")
        except InvalidIdError:
            raise SessionNotFound(f"thread {quote_id(thread_id)} not found") from None
        try:
            return self.runner.manager.get(principal.tenant_id, thread_id, principal.user_id)
        except SessionNotFound:
            raise SessionNotFound(f"thread {quote_id(thread_id)} not found") from None

    def create_session(
        self, principal: Principal, thread_id: str | None, metadata: dict[str, Any] | None
    ) -> ChatSession:
        """A new, empty session (a thread before its first run)."""
        sid = thread_id or str(uuid.uuid4())
        try:
            validate_id(sid, "thread id")
        except InvalidIdError as err:
            raise ConfigError(str(err)) from None
        s = self.settings.session
        context = {METADATA_KEY: jsonable(metadata)} if metadata else {}
        with SessionHold(self.settings, self.runner.lease, principal.tenant_id, sid):  # created under its lease
            return self.runner.manager.create(
                principal.tenant_id,
                s.agent_id,
                principal.user_id or s.user_id,
                sid,
                config_digest=self.runner.pins.surface_digest,
                context=context,
            )

    # --- state ---------------------------------------------------------------------------------------
    def head_config(self, session: ChatSession) -> RunnableConfig:
        """The config of the session's current head checkpoint (the fork point of a fresh branch)."""
        return self._head(session.tenant_id, session.session_id, session.context.get("fork_checkpoint_id"))

    def _head(self, tenant_id: str, thread_id: str, fork_cp: str | None) -> RunnableConfig:
        conf: dict[str, Any] = {"thread_id": thread_id, "tenant_id": tenant_id}
        if fork_cp and self.engine.active(tenant_id, thread_id) is None:
            conf["checkpoint_id"] = fork_cp
        return {"configurable": conf}

    def snapshot(self, session: ChatSession, checkpoint_id: str | None = None) -> StateSnapshot:
        """The graph state at the head (or at `checkpoint_id`)."""
        config = self.head_config(session)
        if checkpoint_id:
            config["configurable"]["checkpoint_id"] = checkpoint_id
        return self.runner.graph.get_state(config)

    def state(self, session: ChatSession, checkpoint_id: str | None = None) -> dict[str, Any]:
        """The API's ThreadState (kept by checkpoint: agent/serve/head_values.py; not to be changed)."""
        found = self.state_at(session, checkpoint_id)
        if found is None:
            if checkpoint_id:
                raise SessionNotFound(f"checkpoint {checkpoint_id} not found in thread {session.session_id}")
            return empty_state(session.session_id)
        return found

    def state_at(self, session: ChatSession, checkpoint_id: str | None = None) -> dict[str, Any] | None:
        """The API's ThreadState at the head (or at `checkpoint_id`); None: no checkpoint there."""
        config = self.head_config(session)
        if checkpoint_id:
            config["configurable"]["checkpoint_id"] = checkpoint_id
        return self.head_values.state(config)

    def history(
        self,
        session: ChatSession,
        limit: int = 10,
        before: str | None = None,
        checkpoint_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """States of the thread, newest first: of every branch shown (agent/serve/thread_history.py)."""
        from agent.serve.thread_history import thread_history  # it reads the thread through this context

        return thread_history(self, session, limit, before, checkpoint_id, metadata)

    def parent(self, session: ChatSession, snap: StateSnapshot) -> StateSnapshot | None:
        """The state before `snap` on its branch (None at the first)."""
        parent = (snap.parent_config or {}).get("configurable") or {}
        if not parent.get("checkpoint_id"):
            return None
        conf = {**parent, "thread_id": session.session_id, "tenant_id": session.tenant_id}
        return self.runner.graph.get_state({"configurable": conf})

    # --- threads -------------------------------------------------------------------------------------
    def thread_status(self, session: ChatSession) -> str:
        """idle / busy / interrupted / error, from the live run and the session's last run."""
        return thread_status_of(self.engine.busy(session.tenant_id, session.session_id), session.last_run_status)

    def thread(self, session: ChatSession, with_values: bool = True) -> dict[str, Any]:
        """The API's Thread object."""
        values, interrupts = self._values(self.head_config(session)) if with_values else ({}, {})
        meta = {
            **(session.context.get(METADATA_KEY) or {}),
            "graph_id": GRAPH_ID,
            "assistant_id": ASSISTANT_ID,
            "user_id": session.user_id,
        }
        return {
            "thread_id": session.session_id,
            "created_at": session.created_at.isoformat(),
            "updated_at": session.last_active_time.isoformat(),
            "metadata": meta,
            "status": self.thread_status(session),
            "values": values,
            "interrupts": interrupts,
            "config": {},
            "error": None,
            "session_status": session.status.value,
            "branch_id": session.current_branch_id,
        }

    def _values(self, config: RunnableConfig) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        """The values and pending interrupts (by task id) of the checkpoint `config` names."""
        return self.head_values.read(config)

    def thread_of_row(self, row: SessionRow, with_values: bool = False) -> dict[str, Any]:
        """The API's Thread object from a session's index row, with the values of its head checkpoint
        when asked (read from the checkpoint alone: no session document)."""
        meta = row.meta
        values: tuple[dict[str, Any], dict[str, list[Any]]] = ({}, {})
        if with_values:
            values = self._values(self._head(row.tenant_id, row.session_id, meta.get("fork_checkpoint_id")))
        status = thread_status_of(self.engine.busy(row.tenant_id, row.session_id), meta.get("last_run_status"))
        return {
            "thread_id": row.session_id,
            "created_at": row.created_at.isoformat(),
            "updated_at": row.last_activity.isoformat(),
            "metadata": {
                **(meta.get("metadata") or {}),
                "graph_id": GRAPH_ID,
                "assistant_id": ASSISTANT_ID,
                "user_id": row.user_id,
            },
            "status": status,
            "values": values[0],
            "interrupts": values[1],
            "config": {},
            "error": None,
            "session_status": row.status,
            "branch_id": meta.get("branch_id") or "main",
        }
