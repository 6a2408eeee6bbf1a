"""`serve.assistant_configs`: named settings an assistant of `agentrt serve` may pick, checked when
the config loads like every other key."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.config import load_settings
from agent.core.errors import ConfigError


def test_a_named_assistant_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("serve:\n  assistant_configs:\n    support: {model_name: small, max_iterations: 40}\n")
    named = load_settings(path).serve.assistant_configs["support"]
    assert named.model_name == "small" and named.max_iterations == 40


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("{tools: [os]}", "serve.assistant_configs.support.tools: unknown key"),
        ("{script: /etc/passwd}", "serve.assistant_configs.support.script: unknown key"),
        ("{max_iterations: 0}", "serve.assistant_configs.support.max_iterations"),
    ],
)
def test_a_named_config_names_only_allowed_settings(tmp_path: Path, entry: str, said: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"serve:\n  assistant_configs:\n    support: {entry}\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    assert said in str(refused.value)
