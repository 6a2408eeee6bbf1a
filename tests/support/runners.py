"""Build runners on temporary dirs with custom scripts and tools, for tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from agent.runner import AgentRunner

ROOT = Path(__file__).resolve().parents[2]


def make_config(
    tmp_path: Path,
    responses: list[dict[str, Any]] | None = None,
    *,
    base: str = "default.yaml",
    **sections: Any,
) -> Path:
    """A config file in `tmp_path`: configs/<base> (its `builtin:` paths work anywhere) with a custom
    script and section overrides."""
    data = yaml.safe_load((ROOT / "configs" / base).read_text())
    data.setdefault("persistence", {})["base_dir"] = str(tmp_path / "agentrt")
    if responses is not None:
        script = tmp_path / "script.yaml"
        script.write_text(yaml.safe_dump({"responses": responses}, sort_keys=False))
        data["model"]["script"] = str(script)
    for section, values in sections.items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def make_runner(tmp_path: Path, responses: list[dict[str, Any]] | None = None, **sections: Any) -> AgentRunner:
    """An AgentRunner on a fresh base_dir."""
    return AgentRunner.from_config(make_config(tmp_path, responses, **sections))
