"""Skills: named instructions plus the tools they allow, from `skills_dir` (shipped: agent/assets/skills/).

A skill is `<skills_dir>/<name>.yaml`:

    description: one line the planner sees
    instructions: |
      what to do and how (markdown)
    tools: [query_dataset, write_file]     # the tools the skill allows (read_tool_result and
                                           # update_todo always stay available)

or a folder `<skills_dir>/<name>/` with `skill.yaml` (same keys, `instructions` optional) and
`SKILL.md` (the instructions body). The planning node may activate one (its plan JSON names a
`skill`), or the user does (`agentrt run --skill NAME`). The active skill is in the graph state
and its definition is part of the runtime surface digest, so a changed skill blocks recovery.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent.core.errors import ConfigError
from agent.core.yaml_errors import yaml_problem

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class Skill:
    """One skill definition."""

    name: str
    description: str
    instructions: str
    tools: tuple[str, ...]

    def as_data(self) -> dict[str, Any]:
        """Plain data (what the surface digest covers)."""
        return {
            "name": self.name,
            "description": self.description,
            "instructions": self.instructions,
            "tools": list(self.tools),
        }


def _parse(name: str, raw: Any, body: str | None, source: Path) -> Skill:
    if not isinstance(raw, dict):
        raise ConfigError(f"skill file {source} must hold a mapping")
    unknown = set(raw) - {"description", "instructions", "tools"}
    if unknown:
        raise ConfigError(f"skill file {source}: unknown keys {sorted(unknown)}")
    tools = raw.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise ConfigError(f"skill file {source}: `tools` must be a list of tool names")
    instructions = body if body is not None else str(raw.get("instructions") or "")
    return Skill(name, str(raw.get("description") or ""), instructions.strip(), tuple(tools))


def load_skills(skills_dir: str | Path | None) -> dict[str, Skill]:
    """Every skill under `skills_dir` by name ({} when there is no such folder)."""
    if not skills_dir:
        return {}
    root = Path(skills_dir)
    if not root.is_dir():
        return {}
    out: dict[str, Skill] = {}
    for path in sorted(root.iterdir()):
        name = path.stem if path.is_file() else path.name
        if path.is_file() and path.suffix not in (".yaml", ".yml"):
            continue
        if not _NAME.match(name):
            raise ConfigError(f"skill name {name!r} ({path}) must be lowercase letters, digits, '-' or '_'")
        try:
            if path.is_dir():
                meta = path / "skill.yaml"
                body_file = path / "SKILL.md"
                raw = yaml.safe_load(meta.read_text(encoding="utf-8")) if meta.is_file() else {}
                body = body_file.read_text(encoding="utf-8") if body_file.is_file() else None
                out[name] = _parse(name, raw or {}, body, path)
            else:
                out[name] = _parse(name, yaml.safe_load(path.read_text(encoding="utf-8")), None, path)
        except yaml.YAMLError as err:
            raise ConfigError(f"skill {path} is not valid YAML: {yaml_problem(err)}") from err
    return out


def check_skill_tools(skills: dict[str, Skill], tool_names: set[str]) -> None:
    """Every tool a skill allows must exist in the toolset."""
    for skill in skills.values():
        missing = [t for t in skill.tools if t not in tool_names]
        if missing:
            raise ConfigError(
                f"skill {skill.name!r} allows unknown tools {missing}; add them to tools.builtins, "
                "or set skills_dir to another folder (null: no skills)"
            )
