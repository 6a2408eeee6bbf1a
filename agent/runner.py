"""AgentRunner: the Python API (and what the CLI calls): run / stream / resume / pause / end / fork."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agent.config import AgentSettings, load_settings
from agent.context import ContextManager
from agent.errors import ConfigError
from agent.models import build_chat_model
from agent.runtime import LoopRuntime
from agent.tool_results import ToolResultStore, make_entry
from agent.tools.base import ToolContext
from agent.tools.registry import build_toolset, toolset_descriptor
from checkpointing.blobs import BlobStore
from checkpointing.ids import validate_id
from graph import runtime as runtime_registry
from graph.build import GRAPH_VERSION, build_graph

log = logging.getLogger("agentrt.runner")


@dataclass
class RunEvent:
    """One streamed event: `kind` is node, token, model_call, tool_call, tool_result, todo, user_turn or final."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    """What a finished (or stopped) run reports."""

    session_id: str
    run_id: str
    answer: str
    status: str
    finish_reason: str | None
    iterations: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    todos: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The `--json` object of `agentrt run`."""
        return dict(self.__dict__)


def build_saver(settings: AgentSettings) -> BaseCheckpointSaver:
    """The checkpoint saver named by `persistence.saver`."""
    kind = settings.persistence.saver
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    base = settings.base_dir
    base.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect(base / "checkpoints.sqlite", check_same_thread=False))
    from checkpointing.saver import JsonlCheckpointSaver

    p = settings.persistence
    return JsonlCheckpointSaver(
        base,
        inline_payload_max_bytes=p.inline_payload_max_bytes,
        fsync=p.fsync,
        keep_last=p.keep_last,
        keyframe_every=p.keyframe_every,
    )


class AgentRunner:
    """Runs agent turns for sessions; one instance per process is the norm."""

    def __init__(self, settings: AgentSettings, saver: BaseCheckpointSaver | None = None) -> None:
        self.settings = settings
        self.tools = build_toolset(settings.tools)
        self.toolset = toolset_descriptor(self.tools)
        build_chat_model(settings.model)  # fail early on a bad model config / missing script
        self.blobs = BlobStore(settings.base_dir)
        self.saver = saver if saver is not None else build_saver(settings)
        self.graph: CompiledStateGraph = build_graph(self.saver)
        self.graph_version = GRAPH_VERSION
        runtime_registry.set_runtime_factory(self._make_runtime)

    @classmethod
    def from_config(cls, path: str | Path | None = None, **overrides: Any) -> AgentRunner:
        """Build a runner from a YAML config (None: the built-in defaults)."""
        return cls(load_settings(path, overrides=overrides or None))

    # --- runtime construction ------------------------------------------------------------------
    def session_dir(self, tenant_id: str, session_id: str) -> Path:
        """`base_dir/tenants/<tenant>/sessions/<session>`."""
        return self.settings.base_dir / "tenants" / tenant_id / "sessions" / session_id

    def _make_runtime(self, session_id: str, state: Mapping[str, Any], config: RunnableConfig) -> LoopRuntime:
        conf = config.get("configurable") or {}
        tenant = str(conf.get("tenant_id") or self.settings.session.tenant_id)
        run_id = str(conf.get("run_id") or "main")
        room = self.session_dir(tenant, session_id) / "workspace"
        room.mkdir(parents=True, exist_ok=True)
        from agent.sandbox import Sandbox

        ctx = ToolContext(session_id=session_id, tenant_id=tenant, run_id=run_id, sandbox=Sandbox(room))
        ctx.tool_results = ToolResultStore.from_entries(list(state.get("tool_result_store") or []), self.blobs)
        rt = LoopRuntime(
            settings=self.settings,
            session_id=session_id,
            tenant_id=tenant,
            run_id=run_id,
            model=build_chat_model(self.settings.model),
            tools=self.tools,
            tool_context=ctx,
            compressor=ContextManager(self.settings) if self.settings.compression.enabled else None,
        )
        ctx.todos = rt.todos
        rt.store_entry_factory = self._store_entry_factory(ctx.tool_results)
        return rt

    def _store_entry_factory(self, store: ToolResultStore) -> Callable[[dict[str, Any], str], dict[str, Any] | None]:
        inline_max = self.settings.persistence.inline_payload_max_bytes
        preview = self.settings.compression.preview_chars

        def factory(call: dict[str, Any], content: str) -> dict[str, Any] | None:
            if call.get("name") == "read_tool_result":
                return None  # a read-back is a view of an archived result, not a new one
            entry = make_entry(call["id"], call["name"], content, self.blobs, inline_max, preview_chars=preview)
            store.add_entry(entry)
            return dict(entry)

        return factory

    # --- runs ------------------------------------------------------------------------------------
    def _config(self, session_id: str, tenant_id: str, run_id: str) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": session_id,
                "tenant_id": tenant_id,
                "run_id": run_id,
                "agent_id": self.settings.session.agent_id,
                "graph_version": self.graph_version,
            },
            "recursion_limit": max(50, self.settings.loop.max_iterations * 6),
        }

    def stream(
        self,
        text: str,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> Iterator[RunEvent]:
        """Run one turn, yielding events as they happen; the last event is `final` with the result."""
        if not text or not text.strip():
            raise ConfigError('empty input: give the agent something to do, e.g. agentrt run "summarise notes.md"')
        tenant = validate_id(tenant_id or self.settings.session.tenant_id, "tenant id")
        sid = validate_id(session_id or f"s-{uuid.uuid4().hex[:16]}", "session id")
        run_id = f"r-{uuid.uuid4().hex[:12]}"
        config = self._config(sid, tenant, run_id)
        yield from self._drive({"user_input": text}, config)

    def _drive(self, graph_input: Any, config: RunnableConfig) -> Iterator[RunEvent]:
        conf = config["configurable"]
        for mode, chunk in self.graph.stream(graph_input, config, stream_mode=["updates", "custom", "messages"]):
            if mode == "updates":
                for node, update in (chunk or {}).items():
                    if node.startswith("__"):
                        yield RunEvent("interrupt", {"node": node, "value": repr(update)})
                        continue
                    data: dict[str, Any] = {"node": node}
                    if isinstance(update, dict):
                        data["keys"] = sorted(update)
                        if "task_todo_list" in update:
                            yield RunEvent("todo", {"todos": update["task_todo_list"]})
                    yield RunEvent("node", data)
            elif mode == "custom":
                payload = dict(chunk) if isinstance(chunk, dict) else {"value": chunk}
                yield RunEvent(str(payload.pop("event", "custom")), payload)
            elif mode == "messages":
                msg, meta = chunk
                if getattr(msg, "type", "") == "AIMessageChunk" and isinstance(msg.content, str) and msg.content:
                    yield RunEvent("token", {"text": msg.content, "node": meta.get("langgraph_node")})
        result = self.result(conf["thread_id"], conf["tenant_id"])
        result.run_id = str(conf.get("run_id") or "")
        yield RunEvent("final", result.to_json())

    def run(
        self,
        text: str,
        session_id: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> RunResult:
        """Run one turn to its end and return the result."""
        final: dict[str, Any] = {}
        for ev in self.stream(text, session_id=session_id, tenant_id=tenant_id, user_id=user_id):
            if ev.kind == "final":
                final = ev.data
        return RunResult(**final)

    def state(self, session_id: str, tenant_id: str | None = None) -> dict[str, Any]:
        """The latest graph state of a session ({} if none)."""
        tenant = tenant_id or self.settings.session.tenant_id
        snap = self.graph.get_state({"configurable": {"thread_id": session_id, "tenant_id": tenant}})
        return dict(snap.values or {})

    def result(self, session_id: str, tenant_id: str | None = None) -> RunResult:
        """Summarize the session's latest state as a RunResult."""
        tenant = tenant_id or self.settings.session.tenant_id
        snap = self.graph.get_state({"configurable": {"thread_id": session_id, "tenant_id": tenant}})
        values = dict(snap.values or {})
        msgs = values.get("runtime_messages") or []
        answer = ""
        if msgs and msgs[-1].get("role") == "ai" and not msgs[-1].get("tool_calls"):
            content = msgs[-1].get("content")
            answer = content if isinstance(content, str) else str(content)
        finish = values.get("finish_reason")
        if snap.next:
            status = "PAUSED" if snap.interrupts else "INTERRUPTED"
        elif finish == "completed":
            status = "COMPLETED"
        elif finish is None:
            status = "UNKNOWN"
        else:
            status = "FAILED"
        usage_in = usage_out = tools = 0
        for m in values.get("messages") or []:
            um = getattr(m, "usage_metadata", None)
            if um:
                usage_in += int(um.get("input_tokens", 0))
                usage_out += int(um.get("output_tokens", 0))
            if getattr(m, "type", "") == "tool":
                tools += 1
        return RunResult(
            session_id=session_id,
            run_id=str((snap.config.get("configurable") or {}).get("run_id") or ""),
            answer=answer,
            status=status,
            finish_reason=finish,
            iterations=int(values.get("iteration_count") or 0),
            model_calls=int(values.get("model_call_count") or 0),
            tool_calls=tools,
            input_tokens=usage_in,
            output_tokens=usage_out,
            error=values.get("error"),
            todos=list(values.get("task_todo_list") or []),
        )
