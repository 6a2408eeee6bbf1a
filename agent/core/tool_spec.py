"""The tool seam: a `ToolSpec` is what the acting node executes and what the toolset hash covers.

A tool function receives a `ToolContext` (the session's runtime handles) and the validated
arguments as keyword arguments, and returns a string (or a JSON-serializable value, which is
serialized as JSON). Raising `ToolError` gives the model a clear error message as the tool result.

An `unsafe` tool whose only effect is one file of the sandbox room may also declare its
`room_effect`: worked out before the call runs and kept in the journal's INTENT, it lets a resume
tell a call that a crash interrupted before its effect from one interrupted after it (see
`agent.tools.journal`), instead of reporting "outcome unknown" for a change it can see.

These types sit on the core floor because both the loop (`agent.loop.runtime` holds and runs the
specs) and the tools (which define them) use them, and neither imports the other. The sandbox room
is seen here as the `Room` protocol; a tool that needs the whole room
(`agent.tools.sandbox.room.Sandbox`) narrows to it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from checkpointing.blobs import Blobs

EffectClass = Literal["read_only", "idempotent", "unsafe"]
EFFECT_CLASSES: tuple[str, ...] = ("read_only", "idempotent", "unsafe")


@dataclass(frozen=True)
class RoomEffect:
    """What one room-writing call will do, worked out before it runs (and recorded in its INTENT).

    The room's file system is the tool's only effect and the write is atomic (a rename), so after
    a crash the file at `path` is either `before` (the call never took effect: run it now) or
    `after` (it did: its result is `result`); anything else is an outcome the journal cannot tell.
    """

    path: str
    """The file, relative to the room (not the workspace), as `Sandbox.room_path` gives it."""
    before: str | None
    """`Sandbox.fingerprint` of `path` now; None when nothing is there."""
    after: str | None
    """Its fingerprint once the call is done; None when the call removes it."""
    result: str
    """The text the call returns when it succeeds."""


class Room(Protocol):
    """What the loop and the tool journal use of a session's sandbox room (`Sandbox` has it all)."""

    blobs: Blobs | None
    """Where the room's files are put when a manifest is taken (None: no snapshots)."""
    refilled: bool
    """Whether the room was rebuilt from a checkpoint's manifest (a resume in a new process)."""

    @property
    def room_id(self) -> str:
        """The room's id."""
        ...

    def manifest(self) -> dict[str, str]:
        """Path -> blob digest of every file of the room (its files put in `blobs`)."""
        ...

    def restore(self, manifest: dict[str, str]) -> int:
        """Make the room hold exactly `manifest`; returns how many files were written."""
        ...

    def fingerprint(self, room_path: str) -> str | None:
        """A digest of the file at `room_path` (None: nothing there)."""
        ...


@dataclass
class ToolContext:
    """What a running tool may touch: handles of the session's LoopRuntime, never persisted."""

    session_id: str
    tenant_id: str
    run_id: str
    sandbox: Room | None = None
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
    # (ctx, **args) -> RoomEffect for a tool whose only effect is one file of the room (see above);
    # not part of the toolset hash: it changes how a crash is recovered, not what the model sees.
    room_effect: Callable[..., RoomEffect] | None = None

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

    def expected_effect(self, ctx: ToolContext, args: dict[str, Any]) -> RoomEffect | None:
        """The call's `RoomEffect` (None when the tool declares none); raises as the call would."""
        if self.room_effect is None:
            return None
        return self.room_effect(ctx, **self.args_schema.model_validate(args).model_dump())


def digest_text(text: str) -> str:
    """`sha256:<hex>` of a text's UTF-8 bytes: a tool result's digest, as the journal and the event
    log keep it (the result itself is stored once)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
