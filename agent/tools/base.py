"""The tool seam: a `ToolSpec` is what the acting node executes and what the toolset hash covers.

A tool function receives a `ToolContext` (the session's runtime handles) and the validated
arguments as keyword arguments, and returns a string (or a JSON-serializable value, which is
serialized as JSON). Raising `ToolError` gives the model a clear error message as the tool result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from agent.tools.sandbox.room import Sandbox

EffectClass = Literal["read_only", "idempotent", "unsafe"]
EFFECT_CLASSES: tuple[str, ...] = ("read_only", "idempotent", "unsafe")


@dataclass
class ToolContext:
    """What a running tool may touch: handles of the session's LoopRuntime, never persisted."""

    session_id: str
    tenant_id: str
    run_id: str
    sandbox: Sandbox | None = None
    tool_results: Any = None  # the session's ToolResultStore (read_tool_result uses it)
    datasets: Any = None  # the session's DatasetCatalog
    todos: Any = None  # the session's TodoManager
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolSpec:
    """One tool: schema for the model, function to run, and its declared effect class.

    effect: `read_only` and `idempotent` tools may be re-run after a crash left their outcome
    unknown; `unsafe` ones (the default for user tools) are never silently re-run.
    """

    name: str
    description: str
    args_schema: type[BaseModel]
    func: Callable[..., Any]
    effect: EffectClass = "unsafe"
    requires_approval: bool = False
    permissions: tuple[str, ...] = ()
    # A tool that only changes graph state (the todo list) bypasses the journal: the checkpoint
    # already makes its effect exactly-once, and it must re-run on replay to rebuild that state.
    state_only: bool = False

    def json_schema(self) -> dict[str, Any]:
        """The arguments' JSON schema as the model sees it."""
        return self.args_schema.model_json_schema()

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI function-tool form (what `bind_tools` receives)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.json_schema()},
        }

    def invoke(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """Validate `args` and run the tool; returns the result text."""
        parsed = self.args_schema.model_validate(args)
        out = self.func(ctx, **parsed.model_dump())
        if isinstance(out, str):
            return out
        return json.dumps(out, ensure_ascii=False, sort_keys=True, default=str)
