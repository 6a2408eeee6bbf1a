"""The small runtime seam the nodes use, and the process-local LoopRuntime registry.

Nodes never hold model clients, tools or sandboxes in state: they look the session's LoopRuntime
up here by session id (`thread_id`). The registry is process-local; after a crash, or in another
process, the init node (or the first node that needs it) rebuilds the runtime through the
registered factory, from configuration, never from the checkpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig


class LoopRuntimeProtocol(Protocol):
    """What nodes need from the session's LoopRuntime (implemented by `agent.loop.runtime.LoopRuntime`)."""

    session_id: str
    run_id: str
    fencing_token: int | None
    dataset_info: list[dict[str, Any]]
    settings: Any  # agent.config.AgentSettings

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

# A runner passes its own factory in the run's config under this key, so several runners (other
# configs, other base_dirs) can share one process; set_runtime_factory is the fallback (Studio).
FACTORY_KEY = "__agentrt_runtime_factory"

_lock = threading.Lock()
_runtimes: dict[tuple[str, str], LoopRuntimeProtocol] = {}
_factory: RuntimeFactory | None = None


def set_runtime_factory(factory: RuntimeFactory | None) -> None:
    """Register how LoopRuntimes are built in this process (the runner and Studio do this)."""
    global _factory
    with _lock:
        _factory = factory


def session_id_of(config: RunnableConfig) -> str:
    """The session id of a graph call (its `thread_id`)."""
    conf = config.get("configurable") or {}
    sid = conf.get("thread_id")
    if not sid:
        raise ValueError("the agent graph needs config['configurable']['thread_id'] (the session id)")
    return str(sid)


def _key(config: RunnableConfig) -> tuple[str, str]:
    conf = config.get("configurable") or {}
    return str(conf.get("tenant_id") or ""), session_id_of(config)


def create_runtime(state: Mapping[str, Any], config: RunnableConfig) -> LoopRuntimeProtocol:
    """Build (or rebuild) the LoopRuntime of this call's session and register it."""
    key = _key(config)
    with _lock:
        factory = (config.get("configurable") or {}).get(FACTORY_KEY) or _factory
    if factory is None:
        raise RuntimeError("no LoopRuntime factory registered: build the graph through agent.AgentRunner")
    runtime = factory(key[1], state, config)
    with _lock:
        _runtimes[key] = runtime
    return runtime


def get_runtime(state: Mapping[str, Any], config: RunnableConfig) -> LoopRuntimeProtocol:
    """The session's LoopRuntime; rebuilt from config when this process has none (after recovery)."""
    key = _key(config)
    with _lock:
        rt = _runtimes.get(key)
    if rt is not None:
        conf = config.get("configurable") or {}
        # A runtime belongs to one run and one lease grant: a resume (new token) rebuilds it.
        if conf.get("run_id") in (None, rt.run_id) and conf.get("fencing_token") == rt.fencing_token:
            return rt
    return create_runtime(state, config)


def drop_runtime(session_id: str, tenant_id: str = "") -> None:
    """Forget a session's LoopRuntime (end of run, or tests)."""
    with _lock:
        _runtimes.pop((tenant_id, session_id), None)


def find_runtime(session_id: str, tenant_id: str | None = None) -> LoopRuntimeProtocol | None:
    """The registered runtime of a session (any tenant when `tenant_id` is None), for inspection."""
    with _lock:
        for (tenant, sid), rt in _runtimes.items():
            if sid == session_id and tenant_id in (None, tenant):
                return rt
    return None


class ModelCallError(RuntimeError):
    """A model call failed (server down, bad response); the run can be resumed once it is fixed."""


def invoke_model(model: BaseChatModel, prompt: Any, config: RunnableConfig, session_id: str, call_index: int) -> Any:
    """Call the model; a provider/network failure becomes one clear error that says how to go on."""
    try:
        return model.invoke(prompt, config)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:
        if type(err).__module__.startswith(("agent.", "checkpointing.")):
            raise
        raise ModelCallError(
            f"model call #{call_index + 1} failed ({type(err).__name__}: {err}); "
            f"fix the model server or config, then `agentrt resume {session_id}`"
        ) from err
