"""What the doctor reads a session through: the runtime's parts, with or without a runner.

`DoctorContext` is what the checks use: the settings, the session manager, the pins of the
current code, the blob store, the lease, where a session's folder and rooms are, and
`read_checkpoint`, which fills a session's checkpoint facts (its document, the state the checks
read, what runs next). Two kinds:

- `RunnerContext`: an `AgentRunner`'s parts; the state is read by LangGraph (`graph.get_state`
  through a fresh saver), whatever the saver or the record store;
- `agent.doctor.light.LightContext`: the embedded default without LangGraph, LangChain, SQLAlchemy
  or psycopg; whatever only LangGraph reads exactly raises `NeedsGraph`, and the caller runs the
  doctor again with a `RunnerContext` (see that module for when).

In the state the checks read, `messages` is a list of `MessageView`s (what the checks look at of
each message), whichever context read it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from checkpointing.audit import newest_document
from checkpointing.layout import session_dir as layout_session_dir

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.doctor.facts import SessionFacts
    from agent.loop.surface import SurfacePins
    from agent.runner.agent_runner import AgentRunner
    from agent.session.lease import SessionLease
    from agent.session.manager import ChatSessionManager
    from checkpointing.blobs import Blobs


class RuntimeParts(Protocol):
    """What the store-wide checks read (an `AgentRunner` or a `DoctorContext`)."""

    @property
    def settings(self) -> AgentSettings:
        """The settings."""

    @property
    def manager(self) -> ChatSessionManager:
        """The session manager."""

    @property
    def pins(self) -> SurfacePins:
        """The pins of the current code."""


class DoctorContext(ABC):
    """The parts of the runtime the doctor's checks read (see the module doc)."""

    settings: AgentSettings

    @property
    @abstractmethod
    def manager(self) -> ChatSessionManager:
        """The session manager (opened on first use)."""

    @property
    @abstractmethod
    def pins(self) -> SurfacePins:
        """The pins a runner of the current code and settings runs under."""

    @property
    @abstractmethod
    def blobs(self) -> Blobs:
        """The blob store."""

    @property
    @abstractmethod
    def lease(self) -> SessionLease:
        """The session lease (read, never taken)."""

    def session_dir(self, tenant_id: str, session_id: str) -> Path:
        """`base_dir/tenants/<tenant>/sessions/<session>`."""
        return layout_session_dir(self.settings.base_dir, tenant_id, session_id)

    def room_dir(self, tenant_id: str, session_id: str, branch_id: str) -> Path:
        """The sandbox room of a branch (`RuntimeBuilder.room_dir`)."""
        from checkpointing.layout import room_dir

        return room_dir(self.session_dir(tenant_id, session_id), branch_id)

    @abstractmethod
    def read_checkpoint(self, facts: SessionFacts) -> None:
        """Fill `facts`' checkpoint facts: `checkpoint_id`, `doc` / `doc_error`, `state` /
        `state_error`, `next_nodes`, `waiting_for_human`, `approval_ids` (read-only)."""


def as_context(runtime: AgentRunner | DoctorContext) -> DoctorContext:
    """`runtime` itself when it is a context, else the context of the runner."""
    return runtime if isinstance(runtime, DoctorContext) else RunnerContext(runtime)


class RunnerContext(DoctorContext):
    """An `AgentRunner`'s parts; the checkpoint read by LangGraph through a fresh saver."""

    def __init__(self, runner: AgentRunner) -> None:
        self.runner = runner
        self.settings = runner.settings

    @property
    def manager(self) -> ChatSessionManager:
        """The runner's session manager."""
        return self.runner.manager

    @property
    def pins(self) -> SurfacePins:
        """The runner's pins."""
        return self.runner.pins

    @property
    def blobs(self) -> Blobs:
        """The runner's blob store."""
        return self.runner.blobs

    @property
    def lease(self) -> SessionLease:
        """The runner's lease."""
        return self.runner.lease

    def session_dir(self, tenant_id: str, session_id: str) -> Path:
        """The runner's session folder."""
        return self.runner.session_dir(tenant_id, session_id)

    def room_dir(self, tenant_id: str, session_id: str, branch_id: str) -> Path:
        """The room the runner's builder gives the branch."""
        builder_room = getattr(self.runner.builder, "room_dir", None)
        return (
            builder_room(tenant_id, session_id, branch_id)
            if builder_room
            else super().room_dir(tenant_id, session_id, branch_id)
        )

    def read_checkpoint(self, facts: SessionFacts) -> None:
        """The branch's checkpoint document and the graph state at it, as LangGraph reads them.

        Reads never modify files (format 2), so the real files are read in place, damaged or not.
        A fresh saver, not the runner's: its in-memory index must not hide damage done after it
        was built."""
        saver, override = self._fresh_reader(facts)
        if facts.session is not None:
            from agent.runner.branches import head_of

            try:  # the checkpoint of the branch the session is on, not the thread's newest
                facts.checkpoint_id = head_of(saver, facts.session, fork_point=facts.fork_point()).checkpoint_id
            except Exception:  # an unreadable checkpoint log is reported by the reads below
                facts.checkpoint_id = None
        get_document = getattr(saver, "get_document", None)
        read = get_document if get_document is not None else self.runner.checkpoint_doc
        self._read_state(facts, partial(read, facts.thread()), override)
        if facts.doc is None and facts.doc_error is not None:
            from checkpointing.codec import CheckpointStateCodec

            facts.doc = newest_document(facts.run_logs(), CheckpointStateCodec().decode)

    def _fresh_reader(self, facts: SessionFacts) -> tuple[Any, Any]:
        """(saver, its checkpointer override): the runner's compiled graph reads through the fresh
        saver when the override is put in the config (no second graph is compiled)."""
        from checkpointing.saver import JsonlCheckpointSaver

        if not isinstance(self.runner.saver, JsonlCheckpointSaver):
            return self.runner.saver, None
        saver = JsonlCheckpointSaver(facts.base_dir, fsync="batch", default_tenant=facts.tenant_id)
        for run, scan in facts.indexable_runs():
            try:
                saver.index_from(facts.tenant_id, facts.session_id, run, scan.records, scan.good)
            except Exception:  # e.g. an unknown schema version: the saver's own reads below report it
                break
        return saver, saver

    def _read_state(self, facts: SessionFacts, read_doc: Callable[[], dict[str, Any] | None], saver: Any) -> None:
        from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER

        from agent.loop.tool_pairs import view_of

        try:
            facts.doc = read_doc()
        except Exception as err:
            facts.doc_error = f"{type(err).__name__}: {err}"
        if facts.doc is None and facts.doc_error is None:
            return
        thread = facts.thread()
        if saver is not None:
            thread = {**thread, "configurable": {**thread["configurable"], CONFIG_KEY_CHECKPOINTER: saver}}
        try:
            snap = self.runner.graph.get_state(thread)
            state = dict(snap.values or {})
            if "messages" in state:
                state["messages"] = [view_of(m) for m in state["messages"] or []]
            facts.state = state
            facts.next_nodes = list(snap.next or ())
            facts.waiting_for_human = bool(getattr(snap, "interrupts", ()))
            facts.approval_ids = [str(i.id) for i in getattr(snap, "interrupts", ())]
        except Exception as err:
            facts.state_error = f"the graph state cannot be restored: {type(err).__name__}: {err}"
