"""LoopRuntime: the session's live objects, never persisted, rebuilt from config.

It holds the chat model, the tool specs, the TodoManager, the ToolResultStore, the sandbox
handle, the active skill and the stream handler, and implements the seam the nodes use
(`graph.context.LoopRuntimeProtocol`; nodes get it from the run's `graph.context.AgentContext`).
Everything here can be rebuilt from the settings plus the graph state, which is what recovery
does in a new process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.config import get_stream_writer
from pydantic import ValidationError

from agent.core.config import AgentSettings
from agent.core.errors import AgentrtError
from agent.core.tool_spec import ToolContext, ToolSpec, digest_text
from agent.loop.models import ScriptedChatModel
from agent.loop.todos import TodoManager

log = logging.getLogger("agentrt.runtime")

EventSink = Callable[[str, dict[str, Any]], None]


@dataclass
class LoopRuntime:
    """The live side of one session's agent loop."""

    settings: AgentSettings
    session_id: str
    tenant_id: str
    run_id: str
    model: BaseChatModel
    tools: dict[str, ToolSpec]
    tool_context: ToolContext
    fencing_token: int | None = None
    todos: TodoManager = field(default_factory=TodoManager)
    active_skill: Any = None  # agent.loop.skills.Skill
    skills: dict[str, Any] = field(default_factory=dict)
    sinks: list[EventSink] = field(default_factory=list)
    tool_executor: Callable[[ToolSpec, dict[str, Any], ToolContext], dict[str, Any]] | None = None
    compressor: Any = None  # agent.loop.context_manager.ContextManager (budget + tiers)
    datasets_summary: str = ""
    dataset_info: list[dict[str, Any]] = field(default_factory=list)  # schema + stats, for state.dataset_list
    journal_knows: Callable[[str], bool] = field(default=lambda _call_id: False)
    store_entry_factory: Callable[[dict[str, Any], str], dict[str, Any] | None] | None = None
    own_errors: tuple[type[BaseException], ...] = (AgentrtError,)
    """Errors that pass through a model call unchanged (`graph.context.invoke_model`)."""
    _bound: BaseChatModel | None = None
    _room_empty: bool = False
    """This runtime found the room empty and no tool that may write has run since."""

    # --- model -----------------------------------------------------------------------------
    def chat_model(self, call_index: int, *, with_tools: bool) -> BaseChatModel:
        """The chat model for the session's `call_index`-th call (scripted models seek to it)."""
        if isinstance(self.model, ScriptedChatModel):
            self.model.seek(call_index)
        if not with_tools or not self.tools:
            return self.model
        if self._bound is None:
            self._bound = self.model.bind_tools([t.to_openai() for t in self.visible_tools()])  # type: ignore[assignment]
        if isinstance(self._bound, ScriptedChatModel):
            self._bound.seek(call_index)
        assert self._bound is not None
        return self._bound

    def activate_skill(self, name: str | None) -> str | None:
        """Make skill `name` active (None: none); returns the active name. Unknown names are ignored."""
        skill = self.skills.get(name) if name else None
        if skill is not self.active_skill:
            self.active_skill = skill
            self._bound = None  # the visible tools changed
        return skill.name if skill is not None else None

    def skills_prompt(self) -> str:
        """The skills the planner may choose from ('' when there are none)."""
        if not self.skills:
            return ""
        lines = [f"- {s.name}: {s.description}" for s in self.skills.values()]
        return ' You may activate one skill by adding "skill": "<name>" to the JSON. Skills:\n' + "\n".join(lines)

    def visible_tools(self) -> list[ToolSpec]:
        """The tools the model may call (the active skill may narrow them)."""
        allowed = getattr(self.active_skill, "tools", None)
        if allowed:
            return [t for n, t in self.tools.items() if n in allowed or n in ("read_tool_result", "update_todo")]
        return list(self.tools.values())

    def system_prompt(self, state: Mapping[str, Any]) -> str:
        """Base prompt + active skill instructions + dataset summary."""
        parts = [self.settings.loop.system_prompt]
        if self.active_skill is not None and self.active_skill.instructions:
            parts.append(f"## Skill: {self.active_skill.name}\n{self.active_skill.instructions}")
        if self.datasets_summary:
            parts.append("## Datasets\n" + self.datasets_summary)
        return "\n\n".join(parts)

    # --- tools -----------------------------------------------------------------------------
    def requires_approval(self, tool_name: str) -> bool:
        """Whether a human must approve calls of this tool (HITL)."""
        spec = self.tools.get(tool_name)
        return bool(spec is not None and spec.requires_approval)

    def execute_tool_calls(
        self, state: Mapping[str, Any], tool_calls: list[dict[str, Any]], rejected: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Run each call in order (through the journal when configured); one result per call.

        Calls in `rejected` (id -> reason) are not run: their result tells the model a human said no.
        """
        self.todos.seed(state.get("task_todo_list"))
        results = []
        for call in tool_calls:
            self.emit("tool_call", {"tool_call_id": call.get("id"), "name": call.get("name"), "args": call.get("args")})
            res: dict[str, Any]
            if rejected and call.get("id") in rejected and not self.journal_knows(call.get("id", "")):
                res = {
                    "status": "rejected",
                    "content": f"rejected by the human reviewer: {rejected[call['id']]}. Do not retry this call; "
                    "continue without it or ask the user.",
                }
            else:
                res = self._execute_one(call)
            if res["status"] == "success" and "store_entry" not in res and self.store_entry_factory is not None:
                entry = self.store_entry_factory(call, res["content"])
                if entry is not None:
                    res["store_entry"] = entry
            self.emit(
                "tool_result",
                {
                    "tool_call_id": call.get("id"),
                    "name": call.get("name"),
                    "status": res["status"],
                    "size": len(res["content"]),
                    "replayed": res.get("replayed", False),
                    # The result itself is stored once (the checkpoint's messages and
                    # tool_result_store, the journal); the event log keeps its digest.
                    "digest": digest_text(res["content"]),
                },
            )
            results.append(res)
        return results

    def _execute_one(self, call: dict[str, Any]) -> dict[str, Any]:
        name = call.get("name", "")
        spec = self.tools.get(name)
        if spec is None:
            known = ", ".join(sorted(self.tools))
            return {"status": "error", "content": f"error: unknown tool {name!r}; available tools: {known}"}
        if self.active_skill is not None and spec not in self.visible_tools():
            allowed = ", ".join(sorted(t.name for t in self.visible_tools()))
            return {
                "status": "error",
                "content": f"error: tool {name!r} is not allowed by the active skill {self.active_skill.name!r}; "
                f"allowed: {allowed}",
            }
        if self.tool_executor is not None and not spec.state_only:
            return self.tool_executor(spec, call, self.tool_context)
        return run_tool(spec, call, self.tool_context)

    def sandbox_update(self, state: Mapping[str, Any], tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
        """A new sandbox manifest (path -> blob digest) when a tool may have changed the room."""
        sandbox = self.tool_context.sandbox
        if sandbox is None:
            return {}
        may_write = any(
            (spec := self.tools.get(c.get("name", ""))) is not None
            and spec.effect != "read_only"
            and not spec.state_only
            for c in tool_calls
        )
        if not may_write and (state.get("sandbox_manifest") is not None or self._room_empty):
            # Read-only calls changed nothing: the state's manifest (or the empty room this
            # runtime scanned, which state keeps as none) still holds, so no scan, no snapshot event.
            return {}
        manifest = sandbox.manifest()
        self._room_empty = not manifest
        if manifest == (state.get("sandbox_manifest") or {}):
            return {}
        self.emit("sandbox", {"kind": "snapshot", "files": len(manifest), "room_id": sandbox.room_id})
        return {"sandbox_manifest": manifest}

    def todo_update(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The todo list as changed by tools (or finished), as a state update; {} when unchanged."""
        if state.get("loop_signal") == "FINISH" and state.get("finish_reason") == "completed":
            self.todos.seed(state.get("task_todo_list"))
            self.todos.finish_all()
        if not self.todos.changed:
            return {}
        self.todos.changed = False
        return {"task_todo_list": [dict(t) for t in self.todos.todos], "current_task": self.todos.current_task()}

    # --- context budget ----------------------------------------------------------------------
    def prompt_tokens(self, state: Mapping[str, Any]) -> int:
        """Estimated prompt tokens of the next model call."""
        if self.compressor is None:
            return 0
        return int(self.compressor.prompt_tokens(state))

    def compression_due(self, state: Mapping[str, Any]) -> bool:
        """Whether the next call would cross a compression tier."""
        return bool(self.compressor is not None and self.compressor.due(state))

    def compress(self, state: Mapping[str, Any], *, reason: str) -> dict[str, Any]:
        """The state update of the compression tier due now ({} when none is due)."""
        if self.compressor is None:
            return {}
        update: dict[str, Any] = self.compressor.compress(self, state, reason=reason)
        return update

    # --- events ------------------------------------------------------------------------------
    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        """Send an event to the event log sinks and to the live stream (when inside a run)."""
        for sink in self.sinks:
            sink(event_type, payload)
        try:
            writer = get_stream_writer()
        except RuntimeError:
            return
        writer({"event": event_type, **{k: v for k, v in payload.items() if k != "content"}})


def run_tool(spec: ToolSpec, call: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run one tool call; any failure becomes an error result the model can read."""
    try:
        content = spec.invoke(ctx, call.get("args") or {})
        return {"status": "success", "content": content}
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "arguments"
        return {"status": "error", "content": f"error: invalid arguments for {spec.name}: {loc}: {first['msg']}"}
    except AgentrtError as err:
        return {"status": "error", "content": f"error: {err}"}
    except Exception as err:  # a user tool's bug must not kill the run; the model sees the error
        log.warning("tool %s raised %s", spec.name, type(err).__name__, exc_info=True)
        return {"status": "error", "content": f"error: {spec.name} failed: {type(err).__name__}: {err}"}
