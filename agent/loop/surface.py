"""The runtime surface a checkpoint is taken under, as digests that recovery compares (docs/concepts/recovery.md).

| pin                  | covers                                                             |
|----------------------|--------------------------------------------------------------------|
| `toolset_hash`       | tool names, argument schemas, effect classes, permissions          |
| `tool_shape_hash`    | tool names, argument schemas, effect classes (no permissions)      |
| `permissions_hash`   | each tool's permissions and approval flag (a distinct block reason)|
| `projection_digest`  | how canonical messages are projected for the model: system prompt, |
|                      | planning mode, compression settings, context window                |
| `surface_digest`     | all of the above + graph version + model provider/name + skill     |

All are stable across processes and hash seeds (canonical JSON + sha256, `checkpointing.digest`)
and never include a key, token or URL credential. They reach the saver as checkpoint metadata
(LangGraph copies `config["configurable"]` scalars into it), which recovery compares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from agent.core.config import AgentSettings
from checkpointing.digest import digest_form, digest_of, is_secret_key
from checkpointing.records import canonical_json


def toolset_hash(tools: Iterable[Mapping[str, Any]]) -> str:
    """Hash of a toolset: each tool as {name, args_schema, effect, permissions}, order-independent.

    Any other key of a tool dict is ignored, so descriptions can be reworded without blocking
    recovery; a renamed tool, a changed argument schema, effect class or permission changes it.
    """
    rows = []
    for t in tools:
        perms = t.get("permissions") or []
        rows.append(
            {
                "name": t.get("name"),
                "args_schema": t.get("args_schema"),
                "effect": t.get("effect"),
                "permissions": sorted(str(p) for p in perms),
            }
        )
    rows.sort(key=lambda r: canonical_json(digest_form(r)))
    return digest_of(rows)


def surface_digest(
    *,
    toolset: str | None = None,
    graph_version: str | None = None,
    message_projection: str | None = None,
    model: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Digest of the runtime surface a checkpoint was taken under.

    `toolset` is a `toolset_hash`, `message_projection` names how canonical messages are
    projected for the model, `model` the model settings that shape behaviour (provider, name...);
    a change in any of them is what recovery must notice (docs/concepts/recovery.md).
    """
    return digest_of(
        {
            "toolset": toolset,
            "graph_version": graph_version,
            "message_projection": message_projection,
            "model": dict(model or {}),
            "extra": dict(extra or {}),
        }
    )


def config_digest(config: Mapping[str, Any], allowlist: Iterable[str]) -> str:
    """Digest of `config` restricted to the allowlisted keys (dotted paths allowed: `a.b`).

    Missing keys are recorded as absent; secret-looking keys are dropped even if allowlisted.
    """
    picked: dict[str, Any] = {}
    for path in sorted(set(allowlist)):
        if any(is_secret_key(part) for part in path.split(".")):
            continue
        cur: Any = config
        found = True
        for part in path.split("."):
            if isinstance(cur, Mapping) and part in cur:
                cur = cur[part]
            else:
                found = False
                break
        if found:
            picked[path] = cur
    return digest_of(picked)


@dataclass(frozen=True)
class SurfacePins:
    """The digests one runtime (settings + tools + graph + skill) runs under."""

    graph_version: str
    toolset_hash: str
    tool_shape_hash: str
    permissions_hash: str
    projection_digest: str
    surface_digest: str
    tool_names: tuple[str, ...]

    def as_config(self) -> dict[str, Any]:
        """The scalars that go into `config["configurable"]` (LangGraph copies them to metadata)."""
        d = asdict(self)
        d.pop("tool_names")
        return d


@dataclass(frozen=True)
class ToolsetDigests:
    """What the pins take from a toolset descriptor (`agent.tools.registry.toolset_descriptor`)."""

    toolset_hash: str
    tool_shape_hash: str
    permissions_hash: str
    tool_names: tuple[str, ...]


def toolset_digests(toolset: list[dict[str, Any]]) -> ToolsetDigests:
    """The digests of a toolset descriptor: whole, without permissions, permissions only; its names."""
    return ToolsetDigests(
        toolset_hash=toolset_hash(toolset),
        tool_shape_hash=digest_of(sorted((t["name"], t.get("args_schema"), t.get("effect")) for t in toolset)),
        permissions_hash=digest_of(
            sorted((t["name"], sorted(t.get("permissions") or []), bool(t.get("requires_approval"))) for t in toolset)
        ),
        tool_names=tuple(sorted(t["name"] for t in toolset)),
    )


def compute_pins(
    settings: AgentSettings, toolset: list[dict[str, Any]], graph_version: str, skill: str | None = None
) -> SurfacePins:
    """Digests of the surface the given settings, toolset descriptor, graph and skill define."""
    return pins_of(settings, toolset_digests(toolset), graph_version, skill)


def pins_of(settings: AgentSettings, tools: ToolsetDigests, graph_version: str, skill: str | None) -> SurfacePins:
    """`compute_pins` from the toolset's digests (what `agent.loop.surface_cache` keeps)."""
    projection = digest_of(
        {
            "system_prompt": settings.loop.system_prompt,
            "planning": settings.loop.planning,
            "compression": settings.compression.model_dump(),
            "context_window": settings.model.context_window,
        }
    )
    surface = surface_digest(
        toolset=tools.toolset_hash,
        graph_version=graph_version,
        message_projection=projection,
        model={"provider": settings.model.provider, "name": settings.model.name},
        extra={"permissions": tools.permissions_hash, "skill": skill},
    )
    return SurfacePins(
        graph_version=graph_version,
        toolset_hash=tools.toolset_hash,
        tool_shape_hash=tools.tool_shape_hash,
        permissions_hash=tools.permissions_hash,
        projection_digest=projection,
        surface_digest=surface,
        tool_names=tools.tool_names,
    )


def skills_digest(skills: dict[str, Any]) -> str | None:
    """Digest of the skill definitions a runtime can activate (None when there are none)."""
    return digest_of([s.as_data() for s in skills.values()]) if skills else None
