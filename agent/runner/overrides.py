"""A run's overrides of the server's settings: what an assistant of `agentrt serve` may change.

The allowlist is `agent.core.config.AssistantOverrides` (model name and sampling, system prompt, planning,
step limit) plus `config_name`, which picks a named entry of `serve.assistant_configs` (the server's
YAML). An override from a client may lower a limit the server sets, never raise it; a named entry is
the operator's and may set any value. Nothing here names a file, a module or a tool.

A run's overrides travel in its LangGraph config (`configurable["overrides"]`, canonical JSON), so
every checkpoint of the run records them, the runtime builder applies them when it builds the run's
LoopRuntime, and the run's pins are those of the settings it really runs under.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agent.core.config import AgentSettings, AssistantOverrides
from agent.core.errors import ConfigError

CONFIG_NAME = "config_name"
ALLOWED: tuple[str, ...] = (*AssistantOverrides.model_fields, CONFIG_NAME)
"""The keys an assistant's `config.configurable` / `context` may hold."""
CONFIG_KEY = "overrides"
"""The key of a run's overrides in its LangGraph `configurable`."""
_LIMITS = {"max_iterations": ("loop", "max_iterations"), "max_output_tokens": ("model", "max_output_tokens")}
"""Limits a client may only lower: override key -> the server's setting."""
_TARGETS = {
    "model_name": ("model", "name"),
    "temperature": ("model", "temperature"),
    "max_output_tokens": ("model", "max_output_tokens"),
    "system_prompt": ("loop", "system_prompt"),
    "planning": ("loop", "planning"),
    "max_iterations": ("loop", "max_iterations"),
}


def check_overrides(settings: AgentSettings, given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`given` (an assistant's configurable or context) checked against the allowlist: the values as
    sent, or `ConfigError` naming the first key (`where.key`) that is unknown or out of range."""
    unknown = sorted(k for k in given if k not in ALLOWED)
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: not a setting an assistant may change; the allowed keys are {', '.join(ALLOWED)}"
        )
    plain = {k: v for k, v in given.items() if k != CONFIG_NAME and v is not None}
    try:
        AssistantOverrides.model_validate(plain)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"{where}.{key}: {first['msg']}") from None
    for key, (section, name) in _LIMITS.items():
        ceiling = getattr(getattr(settings, section), name)
        if plain.get(key) is not None and ceiling is not None and plain[key] > ceiling:
            raise ConfigError(f"{where}.{key}: {plain[key]} is over this server's {section}.{name} ({ceiling})")
    named = given.get(CONFIG_NAME)
    if named is not None and not isinstance(named, str):
        raise ConfigError(f"{where}.{CONFIG_NAME}: must be the name of an entry of serve.assistant_configs")
    if named is not None and named not in settings.serve.assistant_configs:
        known = ", ".join(sorted(settings.serve.assistant_configs)) or "none"
        raise ConfigError(f"{where}.{CONFIG_NAME}: no config {named!r} in serve.assistant_configs (it has: {known})")
    return dict(given)


def resolve(settings: AgentSettings, given: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides a run applies: the named config's, then the keys given beside it (checked already)."""
    out: dict[str, Any] = {}
    named = given.get(CONFIG_NAME)
    if named is not None:
        out.update(settings.serve.assistant_configs[str(named)].model_dump(exclude_none=True))
    plain = {k: v for k, v in given.items() if k != CONFIG_NAME and v is not None}
    out.update(AssistantOverrides.model_validate(plain).model_dump(exclude_none=True))  # "0.5" read as 0.5
    return out


def encode(overrides: Mapping[str, Any]) -> str:
    """The overrides as the canonical JSON string a run's config carries."""
    return json.dumps(dict(overrides), sort_keys=True, separators=(",", ":"))


def decode(value: Any) -> dict[str, Any]:
    """The overrides a run's config carries ({} for none or a value that is not ours)."""
    if not isinstance(value, str) or not value:
        return {}
    try:
        data = json.loads(value)
    except ValueError:
        return {}
    return {k: v for k, v in data.items() if k in _TARGETS} if isinstance(data, dict) else {}


def applied(settings: AgentSettings, overrides: Mapping[str, Any]) -> AgentSettings:
    """`settings` with the overrides applied (the same object when there are none)."""
    if not overrides:
        return settings
    sections: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        if key in _TARGETS:
            section, name = _TARGETS[key]
            sections.setdefault(section, {})[name] = value
    updates = {s: getattr(settings, s).model_copy(update=v) for s, v in sections.items()}
    return settings.model_copy(update=updates)
