"""AgentRunner: the Python API (and what the CLI calls): run / stream / resume / pause / end / fork.

One runner per process is the norm. Each run holds the session lease (fenced), records its
events in the session's event tree, writes checkpoints with `durability="sync"` (a checkpoint is
on disk before the next step starts) and goes through the tool journal, so a crash at any point
resumes with `resume()` to the result an uncrashed run would have had.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StreamMode

from agent import faults
from agent.config import AgentSettings, load_settings
from agent.errors import ConfigError, RecoveryBlocked, SessionError, SessionNotFound
from agent.loop.builder import RuntimeBuilder
from agent.loop.models import build_chat_model
from agent.loop.surface import compute_pins, skills_digest
from agent.loop.tool_results import ToolResultSlice, ToolResultStore
from agent.recovery import check_header, check_identity, compare_pins, restore_messages, step, stored_pins
from agent.results import RunEvent, RunResult, result_from_snapshot
from agent.services import build_lease, build_manager, build_saver
from agent.session.manager import ChatSessionManager
from agent.session.session import ChatSession, SessionStatus
from agent.tools.journal import JournalStatus
from agent.tools.registry import build_toolset, toolset_descriptor
from agent.turns import EventRecorder, SessionHold
from checkpointing.blobs import BlobStore
from checkpointing.errors import InvalidIdError
from checkpointing.ids import validate_id
from graph.build import GRAPH_VERSION, build_graph
from graph.context import AgentContext
from graph.state import SCHEMA_VERSION

if TYPE_CHECKING:
    from agent.submit import TurnHandle

__all__ = ["AgentRunner", "RunEvent", "RunResult", "build_saver"]

log = logging.getLogger("agentrt.runner")
STREAM_MODES: list[StreamMode] = ["updates", "custom", "messages", "checkpoints"]


class AgentRunner:
    """Runs agent turns for sessions, and resumes, pauses, ends and forks them."""

    def __init__(self, settings: AgentSettings, saver: BaseCheckpointSaver | None = None) -> None:
        faults.install()
        self.settings = settings
        self.tools = build_toolset(settings.tools)
        self.toolset = toolset_descriptor(self.tools)
        build_chat_model(settings.model)  # fail early on a bad model config / missing script
        self.blobs = BlobStore(settings.base_dir)
        self.saver = saver if saver is not None else build_saver(settings)
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = build_graph(self.saver)
        self.graph_version = GRAPH_VERSION
        self.lease = build_lease(settings)
        self._manager: ChatSessionManager | None = None
        self.builder = RuntimeBuilder(settings, self.tools, self.blobs)
        self.pins = compute_pins(settings, self.toolset, GRAPH_VERSION, skill=skills_digest(self.builder.skills))

    @classmethod
    def from_config(cls, path: str | Path | None = None, **overrides: Any) -> AgentRunner:
        """Build a runner from a YAML config (None: the built-in defaults)."""
        return cls(load_settings(path, overrides=overrides or None))

    @property
    def manager(self) -> ChatSessionManager:
        """The session manager (opened on first use, so a bad input fails before touching storage)."""
        if self._manager is None:
            self._manager = build_manager(self.settings)
        return self._manager

    def session_dir(self, tenant_id: str, session_id: str) -> Path:
        """`base_dir/tenants/<tenant>/sessions/<session>`."""
        return self.settings.base_dir / "tenants" / tenant_id / "sessions" / session_id

    # --- ids ---------------------------------------------------------------------------------------
    def _ids(self, session_id: str | None, tenant_id: str | None, user_id: str | None) -> tuple[str, str | None, str]:
        try:
            tenant = validate_id(tenant_id or self.settings.session.tenant_id, "tenant id")
            user = validate_id(user_id, "user id") if user_id else None
            sid = validate_id(session_id or f"s-{uuid.uuid4().hex[:16]}", "session id")
        except InvalidIdError as err:
            raise ConfigError(str(err)) from None
        return tenant, user, sid

    def _config(self, session: ChatSession, run_id: str, token: int | None, **extra: Any) -> RunnableConfig:
        conf = {
            "thread_id": session.session_id,
            "tenant_id": session.tenant_id,
            "run_id": run_id,
            "agent_id": session.agent_id,
            "branch_id": session.current_branch_id,
            "turn": session.loop_count,
            "fencing_token": token,
            "state_schema_version": SCHEMA_VERSION,
            **self.pins.as_config(),
            **extra,
        }
        return {"configurable": conf, "recursion_limit": max(60, self.settings.loop.max_iterations * 8)}

    def _thread(self, tenant: str, sid: str) -> RunnableConfig:
        return {"configurable": {"thread_id": sid, "tenant_id": tenant}}

    # --- a new turn ----------------------------------------------------------------------------------
    def stream(
        self,
        text: str,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        skill: str | None = None,
    ) -> Iterator[RunEvent]:
        """Run one turn, yielding events as they happen; the last event is `final` with the result."""
        if not text or not text.strip():
            raise ConfigError('empty input: give the agent something to do, e.g. agentrt run "summarise notes.md"')
        if skill is not None and skill not in self.builder.skills:
            known = ", ".join(sorted(self.builder.skills)) or "none"
            raise ConfigError(f"unknown skill {skill!r}; the skills folder has: {known}")
        tenant, user, sid = self._ids(session_id, tenant_id, user_id)
        session = self._session_for_turn(tenant, sid, user, session_id is None)
        with SessionHold(self.settings, self.lease, tenant, sid) as hold:
            # Re-read under the lease: another run may have ended between the first read and the grant.
            session = self.manager.get(tenant, sid, user)
            self._refuse_unfinished(session)
            session = self.manager.start_turn(session)
            run_id = f"r-{uuid.uuid4().hex[:12]}"
            recorder = EventRecorder(self.manager, session, hold.token, run_id)
            self.manager.mark_run(session, run_id, "RUNNING")
            recorder.record(
                "run_start", {"run_id": run_id, "pins": self.pins.as_config(), "tools": list(self.pins.tool_names)}
            )
            self.manager.memory.add_user_turn(session, text, run_id, hold.token)
            yield RunEvent("started", {"session_id": sid, "run_id": run_id, "tenant_id": tenant})
            extra: dict[str, Any] = {}
            # Kept until the run on the branch closes, so a crash before its first checkpoint resumes there.
            fork_cp = session.context.get("fork_checkpoint_id")
            if fork_cp:
                extra["checkpoint_id"] = fork_cp
            config = self._config(session, run_id, hold.token, **extra)
            graph_input: dict[str, Any] = {"user_input": text}
            if skill is not None:
                graph_input["active_skill"] = skill
            yield from self._drive(graph_input, config, session, recorder)

    async def astream(self, text: str, **kwargs: Any) -> AsyncIterator[RunEvent]:
        """`stream` for asyncio code: the run proceeds in a worker thread, never blocking the event loop."""
        async for ev in _in_thread(lambda: self.stream(text, **kwargs)):
            yield ev

    async def astream_resume(self, session_id: str, **kwargs: Any) -> AsyncIterator[RunEvent]:
        """`stream_resume` for asyncio code (a worker thread drives the run)."""
        async for ev in _in_thread(lambda: self.stream_resume(session_id, **kwargs)):
            yield ev

    def _refuse_unfinished(self, session: ChatSession) -> None:
        sid = session.session_id
        thread = self._thread(session.tenant_id, sid)
        snap = self.graph.get_state(thread)
        nodes = list(snap.next) or [t.name for t in snap.tasks]
        if not nodes:
            doc = self._checkpoint_doc(thread)
            events = self.manager.jsonl.event_log(session.tenant_id, sid)
            if self._turn_without_checkpoint(session, events, str((doc or {}).get("run_id") or "")) is not None:
                nodes = ["init"]  # a turn was recorded, then killed before its first checkpoint
        if nodes:
            raise SessionError(
                f"session {sid} has an unfinished run ({session.last_run_status}, next: {', '.join(nodes)}); "
                f"continue it with `agentrt resume {sid}` before starting a new turn"
            )

    def _run_closed(self, session: ChatSession) -> bool:
        """Whether the session's last run wrote its run_end / run_fail / run_pause entry."""
        events = self.manager.jsonl.event_log(session.tenant_id, session.session_id)
        closing = {"run_end", "run_fail", "run_pause"}
        return any(
            e.type in closing and (e.payload or {}).get("run_id") == session.last_run_id for e in events.entries()
        )

    def _session_for_turn(self, tenant: str, sid: str, user: str | None, new: bool) -> ChatSession:
        if not new:
            try:
                session = self.manager.get(tenant, sid, user)
                session.check_can_start_turn()
                return session
            except SessionNotFound:
                if self.manager.exists(tenant, sid):
                    raise SessionNotFound(
                        f"session {sid} belongs to another user of tenant {tenant}; check --user"
                    ) from None
        s = self.settings.session
        return self.manager.create(tenant, s.agent_id, user or s.user_id, sid, config_digest=self.pins.surface_digest)

    def run(
        self,
        text: str,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        skill: str | None = None,
    ) -> RunResult:
        """Run one turn until it ends or pauses (status PAUSED: a tool awaits approval) and return the result."""
        return _final(self.stream(text, session_id=session_id, tenant_id=tenant_id, user_id=user_id, skill=skill))

    # --- driving the graph ---------------------------------------------------------------------------
    def _drive(
        self, graph_input: Any, config: RunnableConfig, session: ChatSession, recorder: EventRecorder
    ) -> Iterator[RunEvent]:
        conf = config["configurable"]
        self.builder.attach(session.session_id, recorder)
        try:
            # The nodes get this run's LoopRuntime through LangGraph's context (built by init).
            context = AgentContext(self.builder)
            for mode, chunk in self.graph.stream(
                graph_input, config, context=context, stream_mode=STREAM_MODES, durability="sync"
            ):
                yield from self._translate(mode, chunk, recorder)
        except BaseException as err:
            if not isinstance(err, GeneratorExit):
                recorder.record("run_fail", {"run_id": conf["run_id"], "error": f"{type(err).__name__}: {err}"})
                session.context = _without(session.context, "fork_checkpoint_id")
                self.manager.mark_run(session, conf["run_id"], "FAILED")
            raise
        finally:
            self.builder.detach(session.session_id)
            _commit_quietly(recorder)
        result = self.result(session.session_id, session.tenant_id)
        result.run_id = conf["run_id"]
        self._finish(session, recorder, result)
        yield RunEvent("final", result.to_json())

    def _translate(self, mode: str, chunk: Any, recorder: EventRecorder) -> Iterator[RunEvent]:
        if mode == "updates":
            for node, update in (chunk or {}).items():
                if node == "__interrupt__":
                    values = [getattr(i, "value", i) for i in (update or ())]
                    for value in values:
                        recorder.record("hitl_request", {"run_id": recorder.run_id, **_jsonable_dict(value)})
                    yield RunEvent("interrupt", {"requests": values})
                    continue
                recorder.node_done(node)
                data: dict[str, Any] = {"node": node}
                if isinstance(update, dict):
                    data["keys"] = sorted(update)
                    if "task_todo_list" in update:
                        yield RunEvent("todo", {"todos": update["task_todo_list"]})
                yield RunEvent("node", data)
        elif mode == "checkpoints":
            cp_id = chunk["config"]["configurable"]["checkpoint_id"]
            recorder.checkpoint(cp_id, list(chunk.get("next") or []))
        elif mode == "custom":
            payload = dict(chunk) if isinstance(chunk, dict) else {"value": chunk}
            yield RunEvent(str(payload.pop("event", "custom")), payload)
        elif mode == "messages":
            msg, meta = chunk
            if getattr(msg, "type", "") == "AIMessageChunk" and isinstance(msg.content, str) and msg.content:
                yield RunEvent("token", {"text": msg.content, "node": meta.get("langgraph_node")})

    def _finish(self, session: ChatSession, recorder: EventRecorder, result: RunResult) -> None:
        token = recorder.token
        if result.status == "COMPLETED":
            self.manager.memory.add_assistant_message(session, result.answer, result.run_id, token)
            recorder.record("run_end", {"run_id": result.run_id, "finish_reason": result.finish_reason})
        elif result.status == "PAUSED":
            recorder.record("run_pause", {"run_id": result.run_id, "reason": "awaiting human approval"})
        else:
            recorder.record(
                "run_fail", {"run_id": result.run_id, "finish_reason": result.finish_reason, "error": result.error}
            )
        session.context = _without(session.context, "fork_checkpoint_id")
        if self.settings.datasets and self.builder.datasets_loaded(session.tenant_id, session.session_id):
            session.dataset_list = [d.name for d in self.settings.datasets]
            session.datasets_loaded = True
        heads = dict(session.context.get("branch_heads") or {})
        if recorder.last_checkpoint_id:
            heads[session.current_branch_id] = recorder.last_checkpoint_id
        session.context = {**session.context, "branch_heads": heads}
        self.manager.mark_run(session, result.run_id, result.status)

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
    ) -> RunResult:
        """Recover and continue a crashed, paused or interrupted run to its end."""
        return _final(self.stream_resume(session_id, tenant_id, user_id, decision, accept_changes, operator, reason))

    def stream_resume(
        self,
        session_id: str,
        tenant_id: str | None = None,
        user_id: str | None = None,
        decision: dict[str, Any] | None = None,
        accept_changes: tuple[str, ...] | list[str] = (),
        operator: str | None = None,
        reason: str | None = None,
    ) -> Iterator[RunEvent]:
        """`resume` as a stream: a `recovered` event first, then the run's events, then `final`."""
        tenant, user, sid = self._ids(session_id, tenant_id, user_id)
        session = self.manager.get(tenant, sid, user)
        events = self.manager.jsonl.event_log(tenant, sid)
        try:
            with step("read_header"):
                header = events.header()
            check_header(header, session)
        except RecoveryBlocked as err:
            self._blocked(session, None, err)
            raise
        with SessionHold(self.settings, self.lease, tenant, sid) as hold:
            recorder = EventRecorder(self.manager, session, hold.token, session.last_run_id or "")
            try:
                with step("validate_identity"):  # a file recovery cannot read blocks it (e.g. format 1)
                    has_checkpoint = self._checkpoint_doc(self._thread(tenant, sid)) is not None
            except RecoveryBlocked as err:
                self._blocked(session, hold.token, err)
                raise
            if not has_checkpoint:
                lost_first = self._turn_without_checkpoint(session, events, "")
                if lost_first is not None:  # the session's first turn died before its first checkpoint
                    yield from self._rerun_lost_turn(session, recorder, hold.token, lost_first, None, {})
                    return
            try:
                plan = self._recover(session, events, set(accept_changes))
            except RecoveryBlocked as err:
                self._blocked(session, hold.token, err)
                raise
            doc, snap, accepted = plan
            run_id = str(doc.get("run_id") or session.last_run_id or "main")
            recorder.run_id = run_id
            # A step whose writes were saved but whose checkpoint was not (crash between
            # put_writes and put) has no `next` yet still a task: only no task at all is finished.
            pending = list(snap.next) or [t.name for t in snap.tasks]
            lost_turn = self._turn_without_checkpoint(session, events, run_id) if not pending else None
            if lost_turn is not None:
                yield from self._rerun_lost_turn(session, recorder, hold.token, lost_turn, doc, accepted)
                return
            if not pending:
                if session.status is SessionStatus.PAUSED:
                    self.manager.reactivate(session)
                done = {"finished": True, "checkpoint_id": doc.get("checkpoint_id"), "run_id": run_id}
                yield RunEvent("recovered", done)
                result = self.result(sid, tenant)
                result.run_id = run_id
                self._close_finished_run(session, events, recorder, result)
                # Same object shape as `run --json`; the `recovered` event says it had finished.
                yield RunEvent("final", result.to_json())
                return
            answered = bool(snap.interrupts) and self._approval_answered(tenant, sid, run_id, snap.interrupts)
            if answered and decision is not None:
                raise SessionError(
                    f"session {sid}: the pending approval was already answered before the run stopped; "
                    f"resume without --approve/--reject (`agentrt resume {sid}`)"
                )
            if snap.interrupts and decision is None and not answered:
                raise SessionError(f"session {sid} is waiting for a human decision: resume with --approve or --reject")
            if session.status is SessionStatus.PAUSED:
                self.manager.reactivate(session)
            if accepted:
                recorder.record(
                    "recovery_override",
                    {"run_id": run_id, "accepted": accepted, "operator": operator or session.user_id, "reason": reason},
                )
            replayed = self.builder.journal(tenant, sid, hold.token).completed_count(run_id)
            info = {
                "checkpoint_id": doc.get("checkpoint_id"),
                "next_nodes": pending,
                "run_id": run_id,
                "journal_completed": replayed,
                "accepted": accepted,
            }
            recorder.record("run_resume", info)
            yield RunEvent("recovered", info)
            self.manager.mark_run(session, run_id, "RUNNING")
            graph_input: Command[Any] | None = Command(resume=decision) if snap.interrupts and not answered else None
            if decision is not None:
                recorder.record("hitl_decision", {"run_id": run_id, **decision})
            config = self._config(session, run_id, hold.token)
            yield from self._drive(graph_input, config, session, recorder)

    def _rerun_lost_turn(
        self,
        session: ChatSession,
        recorder: EventRecorder,
        token: int | None,
        lost: tuple[str, str],
        doc: dict[str, Any] | None,
        accepted: dict[str, Any],
    ) -> Iterator[RunEvent]:
        """Run a turn that was recorded but killed before its first checkpoint (nothing of it ran)."""
        lost_run, text = lost
        recorder.run_id = lost_run
        info = {
            "checkpoint_id": (doc or {}).get("checkpoint_id"),
            "next_nodes": ["init"],
            "run_id": lost_run,
            "journal_completed": 0,
            "accepted": accepted,
        }
        recorder.record("run_resume", info)
        yield RunEvent("recovered", info)
        extra: dict[str, Any] = {}
        if session.context.get("fork_checkpoint_id"):
            extra["checkpoint_id"] = session.context["fork_checkpoint_id"]
        config = self._config(session, lost_run, token, **extra)
        yield from self._drive({"user_input": text}, config, session, recorder)

    def _approval_answered(self, tenant: str, sid: str, run_id: str, interrupts: Any) -> bool:
        """Whether the pending approval was already acted on: its tool call reached the journal."""
        journal = self.builder.journal(tenant, sid, None)
        for intr in interrupts or ():
            value = getattr(intr, "value", None)
            call_id = value.get("tool_call_id") if isinstance(value, dict) else None
            if call_id and journal.lookup(run_id, call_id).status is not JournalStatus.NONE:
                return True
        return False

    def _turn_without_checkpoint(self, session: ChatSession, events: Any, run_id: str) -> tuple[str, str] | None:
        """(run id, user text) of a turn recorded as started whose graph never wrote a checkpoint."""
        last = session.last_run_id
        if session.last_run_status != "RUNNING" or not last or last == run_id or self._run_closed(session):
            return None
        for entry in reversed(events.entries()):
            if entry.type == "user_turn" and (entry.payload or {}).get("run_id") == last:
                return last, str(entry.payload.get("content") or "")
        return None

    def _close_finished_run(
        self, session: ChatSession, events: Any, recorder: EventRecorder, result: RunResult
    ) -> None:
        """A process killed after the graph's last checkpoint but before the run was closed left
        no answer on the page and the run RUNNING: write what is missing, once."""
        if session.last_run_status == result.status and session.last_run_id == result.run_id:
            return
        done = {e.type for e in events.entries() if (e.payload or {}).get("run_id") == result.run_id}
        if result.status == "COMPLETED" and "assistant_message" not in done:
            self.manager.memory.add_assistant_message(session, result.answer, result.run_id, recorder.token)
        if not done & {"run_end", "run_fail"}:
            kind = "run_end" if result.status == "COMPLETED" else "run_fail"
            recorder.record(
                kind, {"run_id": result.run_id, "finish_reason": result.finish_reason, "error": result.error}
            )
        session.context = _without(session.context, "fork_checkpoint_id")
        snap_config = self.graph.get_state(self._thread(session.tenant_id, session.session_id)).config or {}
        cp_id = (snap_config.get("configurable") or {}).get("checkpoint_id")
        if cp_id:
            heads = dict(session.context.get("branch_heads") or {})
            heads[session.current_branch_id] = cp_id
            session.context = {**session.context, "branch_heads": heads}
        self.manager.mark_run(session, result.run_id, result.status)

    def _recover(
        self, session: ChatSession, events: Any, accept: set[str]
    ) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        thread = self._thread(session.tenant_id, session.session_id)
        with step("validate_identity"):
            doc = self._checkpoint_doc(thread)
        if doc is None:
            raise SessionError(f"session {session.session_id} has no checkpoint: there is nothing to resume")
        check_identity(doc, session, self.settings.session.agent_id, set(events.branches()) | {"main"})
        found = stored_pins(doc)
        accepted = compare_pins(found, self.pins, accept, ("state_schema_version", "graph_version"))
        with step("restore_state"):
            snap = self.graph.get_state(thread)
        accepted |= compare_pins(
            found,
            self.pins,
            accept,
            ("tool_shape_hash", "permissions_hash", "toolset_hash", "projection_digest", "surface_digest"),
        )
        restore_messages(dict(snap.values or {}))
        return doc, snap, accepted

    def _checkpoint_doc(self, thread: RunnableConfig) -> dict[str, Any] | None:
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

    def _blocked(self, session: ChatSession, token: int | None, err: RecoveryBlocked) -> None:
        payload = {
            "step": err.step,
            "reason": err.reason,
            "expected": _jsonable(err.expected),
            "found": _jsonable(err.found),
        }
        try:
            self._record_block(session, payload, token)
            self.manager.mark_run(session, session.last_run_id or "", "RECOVERY_BLOCKED")
        except Exception as exc:  # the block itself must still reach the caller
            log.warning("could not record RECOVERY_BLOCKED for %s: %s", session.session_id, exc)

    def _record_block(self, session: ChatSession, payload: dict[str, Any], token: int | None) -> None:
        events = self.manager.jsonl.event_log(session.tenant_id, session.session_id)
        leaf = session.current_leaf_entry_id
        if leaf is None or events.has(leaf):
            self.manager.record(session, "recovery_blocked", payload, fencing_token=token)
            return
        # The session points at an entry the log no longer has (an event log restored from an
        # older backup): log the block at the end of the main branch, keep the session's pointers.
        anchor = session.model_copy()
        anchor.current_branch_id = "main"
        anchor.current_leaf_entry_id = events.branch_leaf("main")
        self.manager.record(anchor, "recovery_blocked", payload, fencing_token=token)

    # --- lifecycle ---------------------------------------------------------------------------------------
    def pause(self, session_id: str, tenant_id: str | None = None, user_id: str | None = None) -> ChatSession:
        """Mark the session PAUSED: plain turns are refused until `resume` (or end + fork)."""
        tenant, user, sid = self._ids(session_id, tenant_id, user_id)
        with SessionHold(self.settings, self.lease, tenant, sid) as hold:  # LeaseHeld while a run is going
            session = self.manager.pause(tenant, sid, user)
            self.manager.record(session, "run_pause", {"reason": "paused by the user"}, fencing_token=hold.token)
            return self.manager.save(session)

    def end(self, session_id: str, tenant_id: str | None = None, user_id: str | None = None) -> ChatSession:
        """Mark the session ENDED (no new turns; forking a branch reopens it)."""
        tenant, user, sid = self._ids(session_id, tenant_id, user_id)
        with SessionHold(self.settings, self.lease, tenant, sid) as hold:
            session = self.manager.end(tenant, sid, user)
            self.manager.record(session, "run_end", {"session_ended": True}, fencing_token=hold.token)
            return self.manager.save(session)

    def fork(
        self, session_id: str, from_entry_id: str, tenant_id: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        """Start a branch at an earlier entry; the next turn continues from that entry's checkpoint."""
        tenant, user, sid = self._ids(session_id, tenant_id, user_id)
        with SessionHold(self.settings, self.lease, tenant, sid):  # not while a run is going
            return self._fork_held(tenant, user, sid, from_entry_id)

    def _fork_held(self, tenant: str, user: str | None, sid: str, from_entry_id: str) -> dict[str, Any]:
        session = self.manager.get(tenant, sid, user)
        events = self.manager.jsonl.event_log(tenant, sid)
        if not events.has(from_entry_id):
            raise ConfigError(f"entry {from_entry_id} is not in session {sid}; see `agentrt show {sid}` for entry ids")
        checkpoint_id = None
        for entry in events.path_to_root(from_entry_id, types=frozenset({"node_end"})):  # nearest first
            checkpoint_id = (entry.payload or {}).get("checkpoint_id")
            if checkpoint_id:
                break
        if checkpoint_id is None:
            raise ConfigError(
                f"entry {from_entry_id} comes before the session's first checkpoint, so there is no state to branch "
                "from: fork from a later entry, or start a new session"
            )
        branch_id = self.manager.fork(session, from_entry_id, extra={"checkpoint_id": checkpoint_id})
        session.context = {**session.context, "fork_checkpoint_id": checkpoint_id}
        pin = getattr(self.saver, "pin", None)
        if pin is not None:
            pin({"configurable": {"thread_id": sid, "tenant_id": tenant, "checkpoint_id": checkpoint_id}})
        self.manager.save(session)
        return {
            "session_id": sid,
            "branch_id": branch_id,
            "from_entry_id": from_entry_id,
            "checkpoint_id": checkpoint_id,
        }

    # --- workers -------------------------------------------------------------------------------------------
    def submit(
        self,
        text: str,
        session_id: str,
        tenant_id: str | None = None,
        user_id: str | None = None,
        turn_id: str | None = None,
    ) -> TurnHandle:
        """Queue a turn for the Celery workers (`workers.broker_url`); `.wait()` / `.status()` follow it."""
        from agent.submit import submit_turn

        return submit_turn(self.settings, text, session_id, tenant_id, user_id, turn_id)

    def submit_decision(self, session_id: str, decision: dict[str, Any], tenant_id: str | None = None) -> TurnHandle:
        """Approve or reject a submitted turn that paused for approval; a worker continues it."""
        from agent.submit import submit_decision

        return submit_decision(self.settings, session_id, decision, tenant_id)

    # --- reading -------------------------------------------------------------------------------------------
    def sessions(self, tenant_id: str | None = None, user_id: str | None = None) -> list[ChatSession]:
        """The tenant's sessions (only the user's when given)."""
        tenant, user, _ = self._ids(None, tenant_id, user_id)
        return self.manager.list(tenant, user)

    def show(
        self, session_id: str, tenant_id: str | None = None, user_id: str | None = None, last: int = 15
    ) -> dict[str, Any]:
        """Header, status, branches and the last entries of a session."""
        tenant, user, sid = self._ids(session_id, tenant_id, user_id)
        session = self.manager.get(tenant, sid, user)
        events = self.manager.jsonl.event_log(tenant, sid)
        snap = self.graph.get_state(self._thread(tenant, sid))
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

    def state(self, session_id: str, tenant_id: str | None = None) -> dict[str, Any]:
        """The latest graph state of a session ({} if none)."""
        tenant = tenant_id or self.settings.session.tenant_id
        return dict(self.graph.get_state(self._thread(tenant, session_id)).values or {})

    def result(self, session_id: str, tenant_id: str | None = None) -> RunResult:
        """Summarize the session's latest state as a RunResult."""
        tenant = tenant_id or self.settings.session.tenant_id
        return result_from_snapshot(session_id, self.graph.get_state(self._thread(tenant, session_id)))

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
        tenant, user, sid = self._ids(session_id, tenant_id, user_id)
        self.manager.get(tenant, sid, user)  # tenant/user check
        store = ToolResultStore.from_entries(list(self.state(sid, tenant).get("tool_result_store") or []), self.blobs)
        return store.read(tool_call_id, offset, limit)


async def _in_thread(make: Callable[[], Iterator[RunEvent]]) -> AsyncIterator[RunEvent]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def pump() -> None:
        try:
            for ev in make():
                loop.call_soon_threadsafe(queue.put_nowait, ("event", ev))
        except BaseException as err:  # handed to the awaiting side, which re-raises it
            loop.call_soon_threadsafe(queue.put_nowait, ("error", err))
        else:
            loop.call_soon_threadsafe(queue.put_nowait, ("done", None))

    worker = threading.Thread(target=pump, name="agentrt-run", daemon=True)
    worker.start()
    while True:
        kind, value = await queue.get()
        if kind == "event":
            yield value
        elif kind == "error":
            raise value
        else:
            return


def _final(events: Iterator[RunEvent]) -> RunResult:
    final: dict[str, Any] = {}
    for ev in events:
        if ev.kind == "final":
            final = ev.data
    final.pop("note", None)
    return RunResult(**final)


def _commit_quietly(recorder: EventRecorder) -> None:
    """Make the run's deferred event entries durable however the drive ended (never masks its error)."""
    try:
        recorder.commit()
    except Exception as err:
        log.warning("could not sync the event log of %s: %s", recorder.session.session_id, err)


def _without(context: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in context.items() if k != key}


def _jsonable_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) and isinstance(_jsonable(value), dict) else {"value": repr(value)}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _summary(payload: Mapping[str, Any] | None) -> str:
    if not payload:
        return ""
    text = json.dumps({k: v for k, v in payload.items() if k != "content"}, ensure_ascii=False, default=str)
    return text if len(text) <= 160 else text[:157] + "..."
