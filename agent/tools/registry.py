"""The toolset of a runtime: built-ins by name, user tools by import path (`module:callable`).

An import path names a `ToolSpec`, a zero-argument factory returning one (or a list), a LangChain
`BaseTool`, or a plain typed function `f(ctx, **args)` / `f(**args)`; the config may override its
name, effect class, approval flag and permissions. The import path comes from the user's config
file, never from stored data.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, create_model

from agent.core.config import ToolEntry, ToolsSettings
from agent.core.errors import ConfigError
from agent.core.tool_spec import ToolContext, ToolSpec

BUILTIN_MODULES = (
    "agent.tools.file_tools",
    "agent.tools.calculator",
    "agent.tools.dataset_tools",
    "agent.tools.read_tool_result",
    "agent.tools.todo_tools",
    "agent.tools.publish",
)


def builtin_tools() -> dict[str, ToolSpec]:
    """Every built-in tool by name (ToolSpecs are immutable, so they are shared)."""
    out: dict[str, ToolSpec] = {}
    for mod_name in BUILTIN_MODULES:
        module = importlib.import_module(mod_name)
        found: list[ToolSpec] = [v for v in vars(module).values() if isinstance(v, ToolSpec)]
        for attr, value in vars(module).items():
            if attr.startswith("builtin_") and attr.endswith("tools") and callable(value):
                found.extend(value())
        for spec in found:
            out[spec.name] = spec
    return out


def builtin_names() -> list[str]:
    """Names of every built-in tool."""
    return sorted(builtin_tools())


def _import(path: str) -> Any:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"tool import path {path!r} must look like 'package.module:callable'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"cannot import tool module {module_name!r} (from {path!r}): {err}") from err
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError as err:
        raise ConfigError(f"module {module_name!r} has no attribute {attr!r} (tool path {path!r})") from err
    return obj


def _from_function(fn: Callable[..., Any]) -> ToolSpec:
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    wants_ctx = bool(params) and params[0].name in ("ctx", "context")
    fields: dict[str, Any] = {}
    for p in params[1:] if wants_ctx else params:
        ann = p.annotation if p.annotation is not inspect.Parameter.empty else str
        fields[p.name] = (ann, ... if p.default is inspect.Parameter.empty else p.default)
    schema = create_model(f"{fn.__name__}_args", **fields)

    def run(ctx: ToolContext, **kwargs: Any) -> Any:
        return fn(ctx, **kwargs) if wants_ctx else fn(**kwargs)

    return ToolSpec(name=fn.__name__, description=(fn.__doc__ or fn.__name__).strip(), args_schema=schema, func=run)


def _from_langchain(tool: BaseTool) -> ToolSpec:
    schema = (
        tool.args_schema if isinstance(tool.args_schema, type) and issubclass(tool.args_schema, BaseModel) else None
    )
    if schema is None:
        schema = create_model(f"{tool.name}_args", input=(str, ...))

    def run(ctx: ToolContext, **kwargs: Any) -> Any:
        return tool.invoke(kwargs)

    return ToolSpec(name=tool.name, description=tool.description, args_schema=schema, func=run)


def load_custom_tool(entry: ToolEntry) -> list[ToolSpec]:
    """Load one user tool entry from its import path and apply the config's overrides."""
    obj = _import(entry.path)
    specs: list[ToolSpec]
    if isinstance(obj, ToolSpec):
        specs = [obj]
    elif isinstance(obj, BaseTool):
        specs = [_from_langchain(obj)]
    elif callable(obj) and not inspect.signature(obj).parameters:
        made = obj()
        specs = made if isinstance(made, list) else [made]
        if not all(isinstance(s, ToolSpec) for s in specs):
            raise ConfigError(f"tool factory {entry.path!r} must return a ToolSpec or a list of them")
    elif callable(obj):
        specs = [_from_function(obj)]
    else:
        raise ConfigError(f"{entry.path!r} is not a tool (ToolSpec, BaseTool, factory or function)")
    out = []
    for spec in specs:
        changes: dict[str, Any] = {}
        if entry.name and len(specs) == 1:
            changes["name"] = entry.name
        if entry.effect is not None:
            changes["effect"] = entry.effect
        if entry.requires_approval is not None:
            changes["requires_approval"] = entry.requires_approval
        if entry.permissions is not None:
            changes["permissions"] = tuple(entry.permissions)
        out.append(ToolSpec(**{**spec.__dict__, **changes}))
    return out


def build_toolset(settings: ToolsSettings) -> dict[str, ToolSpec]:
    """Every tool of the runtime, by name (order: built-ins as listed, then custom)."""
    builtins = builtin_tools()
    tools: dict[str, ToolSpec] = {}
    for name in settings.builtins:
        if name not in builtins:
            raise ConfigError(f"unknown built-in tool {name!r}; available: {', '.join(sorted(builtins))}")
        tools[name] = builtins[name]
    for entry in settings.custom:
        for spec in load_custom_tool(entry):
            if spec.name in tools:
                raise ConfigError(f"tool name {spec.name!r} is defined twice (from {entry.path!r})")
            tools[spec.name] = spec
    return tools


def toolset_descriptor(tools: dict[str, ToolSpec]) -> list[dict[str, Any]]:
    """Plain data the toolset hash covers: name, argument schema, effect class, permissions, approval."""
    return [
        {
            "name": s.name,
            "args_schema": s.json_schema(),
            "effect": s.effect,
            "permissions": sorted(s.permissions),
            "requires_approval": s.requires_approval,
        }
        for s in sorted(tools.values(), key=lambda s: s.name)
    ]
