"""The runtime surface a checkpoint is taken under, as digests that recovery compares (seed §5).

| pin                  | covers                                                             |
|----------------------|--------------------------------------------------------------------|
| `toolset_hash`       | tool names, argument schemas, effect classes, permissions          |
| `tool_shape_hash`    | tool names, argument schemas, effect classes (no permissions)      |
| `permissions_hash`   | each tool's permissions and approval flag (a distinct block reason)|
| `projection_digest`  | how canonical messages are projected for the model: system prompt, |
|                      | planning mode, compression settings, context window                |
| `surface_digest`     | all of the above + graph version + model provider/name + skill     |

All are stable across processes and hash seeds (canonical JSON + sha256) and never include a key,
token or URL credential.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agent.config import AgentSettings
from checkpointing.digest import digest_of, surface_digest, toolset_hash


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


def compute_pins(
    settings: AgentSettings, toolset: list[dict[str, Any]], graph_version: str, skill: str | None = None
) -> SurfacePins:
    """Digests of the surface the given settings, toolset descriptor, graph and skill define."""
    tools_h = toolset_hash(toolset)
    shape_h = digest_of(sorted((t["name"], t.get("args_schema"), t.get("effect")) for t in toolset))
    perms_h = digest_of(
        sorted((t["name"], sorted(t.get("permissions") or []), bool(t.get("requires_approval"))) for t in toolset)
    )
    projection = digest_of(
        {
            "system_prompt": settings.loop.system_prompt,
            "planning": settings.loop.planning,
            "compression": settings.compression.model_dump(),
            "context_window": settings.model.context_window,
        }
    )
    surface = surface_digest(
        toolset=tools_h,
        graph_version=graph_version,
        message_projection=projection,
        model={"provider": settings.model.provider, "name": settings.model.name},
        extra={"permissions": perms_h, "skill": skill},
    )
    return SurfacePins(
        graph_version=graph_version,
        toolset_hash=tools_h,
        tool_shape_hash=shape_h,
        permissions_hash=perms_h,
        projection_digest=projection,
        surface_digest=surface,
        tool_names=tuple(sorted(t["name"] for t in toolset)),
    )


def skills_digest(skills: dict[str, Any]) -> str | None:
    """Digest of the skill definitions a runtime can activate (None when there are none)."""
    return digest_of([s.as_data() for s in skills.values()]) if skills else None
