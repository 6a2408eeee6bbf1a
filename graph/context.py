"""The small runtime seam the nodes use: the LoopRuntime protocol and the graph's context schema.

Nodes never hold model clients, tools or sandboxes in state, and there is no process-wide registry:
the caller passes an `AgentContext` (LangGraph's `context=`, read by nodes as `Runtime.context`)
holding a LoopRuntime factory; the init node builds the run's runtime with it, and after a crash,
or in another process, the first node that needs one rebuilds it from configuration, never from
the checkpoint. This module imports nothing of `agent` or `nodes`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from checkpointing.exceptions import CheckpointingError


class LoopRuntimeProtocol(Protocol):
    """What nodes need from the session's LoopRuntime (implemented by `agent.loop.runtime.LoopRuntime`)."""

    session_id: str
    run_id: str
    fencing_token: int | None
    dataset_info: list[dict[str, Any]]
    settings: Any  # agent.core.config.AgentSettings
    own_errors: tuple[type[BaseException], ...]
    """The runtime's error classes: raised inside a model call, they pass through `invoke_model` unchanged."""

    def chat_model(self, call_index: int, *, with_tools: bool) -> BaseChatModel:
        """The chat model for the `call_index`-th model call of the session (tools bound or not)."""

    def system_prompt(self, state: Mapping[str, Any]) -> str:
        """The system prompt for this session (skill, datasets summary included)."""

    def execute_tool_calls(
        self, state: Mapping[str, Any], tool_calls: list[dict[str, Any]], rejected: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Run (or replay from the journal) each call; returns one result dict per call, in order."""

    def activate_skill(self, name: str | None) -> str | None:
        """Make a skill active; returns the active skill's name (None if unknown or none)."""

    def skills_prompt(self) -> str:
        """The skills the planner may activate, as prompt text."""

    def requires_approval(self, tool_name: str) -> bool:
        """Whether a human must approve calls of this tool."""

    def sandbox_update(self, state: Mapping[str, Any], tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
        """A new sandbox manifest for state when the tools changed the room ({} otherwise)."""

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        """Record an event (event log + live stream)."""

    def compress(self, state: Mapping[str, Any], *, reason: str) -> dict[str, Any]:
        """Apply the compression tier due now; returns the state update (may be empty)."""

    def prompt_tokens(self, state: Mapping[str, Any]) -> int:
        """Estimated prompt tokens of the next model call."""

    def compression_due(self, state: Mapping[str, Any]) -> bool:
        """Whether the next model call would cross a compression tier."""

    def todo_update(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The todo list as changed by tools (or finished), as a state update."""


RuntimeFactory = Callable[[str, Mapping[str, Any], RunnableConfig], LoopRuntimeProtocol]
"""Builds a session's LoopRuntime: (session id, state, config) -> runtime (agent.runner.builder.RuntimeBuilder)."""


def session_id_of(config: RunnableConfig) -> str:
    """The session id of a graph call (its `thread_id`)."""
    conf = config.get("configurable") or {}
    sid = conf.get("thread_id")
    if not sid:
        raise ValueError("the agent graph needs config['configurable']['thread_id'] (the session id)")
    return str(sid)


@dataclass
class AgentContext:
    """The graph's `context_schema`: what one run hands its nodes (LangGraph `Runtime.context`).

    The caller (the runner, a worker, the server) passes a fresh one per run as
    `graph.stream(..., context=AgentContext(factory))`; the init node builds the run's LoopRuntime
    through `factory` and every later node of the run reuses it. A run resumed in another process
    gets a new context, so the first node that needs the runtime rebuilds it from config.
    """

    # Typed loosely on purpose: LangGraph derives the context's JSON schema (Studio shows it) from
    # these annotations, and a callable has none. `factory` is a RuntimeFactory.
    factory: Any = None  # None: not given (a server may send `{}`); the graph's default context applies
    runtime: Any = field(default=None, compare=False)  # LoopRuntimeProtocol | None

    def loop_runtime(
        self, state: Mapping[str, Any], config: RunnableConfig, *, fresh: bool = False
    ) -> LoopRuntimeProtocol:
        """The run's LoopRuntime: built on first use (or when `fresh`), then kept for the run."""
        if fresh or self.runtime is None:
            self.runtime = self.factory(session_id_of(config), state, config)
        rt: LoopRuntimeProtocol = self.runtime
        return rt


def loop_runtime(
    runtime: Runtime[AgentContext], state: Mapping[str, Any], config: RunnableConfig, *, fresh: bool = False
) -> LoopRuntimeProtocol:
    """The LoopRuntime of the node's run, from LangGraph's injected `Runtime.context`."""
    ctx = runtime.context
    if not isinstance(ctx, AgentContext) or ctx.factory is None:
        raise RuntimeError(
            "the agent graph needs its context: run it through agent.AgentRunner, or pass "
            "context=graph.context.AgentContext(factory) to invoke/stream"
        )
    return ctx.loop_runtime(state, config, fresh=fresh)


class ModelCallError(RuntimeError):
    """A model call failed (server down, bad response); the run can be resumed once it is fixed."""


def invoke_model(
    model: BaseChatModel,
    prompt: Any,
    config: RunnableConfig,
    session_id: str,
    call_index: int,
    own: tuple[type[BaseException], ...] = (),
) -> Any:
    """Call the model; a provider/network failure becomes one clear error that says how to go on.

    The checkpointing errors and the runtime's own (`own`: `LoopRuntimeProtocol.own_errors`, e.g.
    a scripted model's) pass through unchanged: they already say what to do."""
    try:
        return model.invoke(prompt, config)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:
        if isinstance(err, (CheckpointingError, *own)):
            raise
        raise ModelCallError(
            f"model call #{call_index + 1} failed ({type(err).__name__}: {err}); "
            f"fix the model server or config, then `agentrt resume {session_id}`"
        ) from err
