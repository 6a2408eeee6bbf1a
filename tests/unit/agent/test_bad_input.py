"""Bad config and bad input give one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.core.config import load_settings
from agent.core.errors import ConfigError
from agent.runner import AgentRunner
from tests.support.runners import make_config


def _cli_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "Traceback" not in err
    assert err.startswith("agentrt: error:")
    return err


def test_unknown_config_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelled key is reported with its location instead of being ignored."""
    cfg = make_config(tmp_path)
    data = yaml.safe_load(cfg.read_text())
    data["loop"]["max_iteratons"] = 3
    cfg.write_text(yaml.safe_dump(data))
    err = _cli_error(capsys, ["run", "--config", str(cfg), "hi"])
    assert "loop.max_iteratons: unknown key" in err


def test_missing_script_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config whose model script does not exist says which file is missing."""
    cfg = make_config(tmp_path, model={"script": str(tmp_path / "nope.yaml")})
    err = _cli_error(capsys, ["run", "--config", str(cfg), "hi"])
    assert "model.script: " in err and "nope.yaml does not exist" in err


def test_unknown_tool_import_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A user tool that cannot be imported names the module and the path."""
    cfg = make_config(tmp_path, tools={"custom": [{"path": "no_such_pkg.tools:thing"}]})
    err = _cli_error(capsys, ["run", "--config", str(cfg), "hi"])
    assert "no_such_pkg" in err


def test_malformed_tool_import_path(tmp_path: Path) -> None:
    """An import path without ':' says what shape it must have."""
    cfg = make_config(tmp_path, tools={"custom": [{"path": "just_a_module"}]})
    with pytest.raises(ConfigError, match=r"package\.module:callable"):
        AgentRunner.from_config(cfg)


def test_empty_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Empty input is refused before anything is stored."""
    cfg = make_config(tmp_path)
    err = _cli_error(capsys, ["run", "--config", str(cfg), "   "])
    assert "empty input" in err
    assert not (tmp_path / "agentrt" / "tenants").exists()


def test_missing_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A --config that does not exist is one clear line."""
    err = _cli_error(capsys, ["run", "--config", str(tmp_path / "missing.yaml"), "hi"])
    assert "config file not found" in err


def test_builtin_defaults_equal_default_yaml(tmp_path: Path) -> None:
    """Without --config the settings are exactly those of configs/default.yaml, and so are those of
    an empty config file: the built-in defaults (the model's defaults, no file read) are the file."""
    root = Path(__file__).resolve().parents[3]
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    a = load_settings(None).model_dump()
    b = load_settings(root / "configs" / "default.yaml").model_dump()
    assert a == b == load_settings(empty).model_dump()
    # every setting the file names, at the value it names (the shipped files as absolute paths)
    import yaml

    raw = yaml.safe_load((root / "configs" / "default.yaml").read_text())
    for section, values in raw.items():
        if isinstance(values, dict):
            for key, value in values.items():
                want = str(root / "agent" / "assets" / value.removeprefix("builtin:")) if key == "script" else value
                assert a[section][key] == want, f"{section}.{key}"
    assert a["skills_dir"] == str(root / "agent" / "assets" / "skills")
    assert [d["path"] for d in a["datasets"]] == [
        str(root / "agent" / "assets" / d["path"].removeprefix("builtin:")) for d in raw["datasets"]
    ]


def test_custom_tool_by_import_path(tmp_path: Path) -> None:
    """A plain typed function named by import path becomes a tool the model can call."""
    cfg = make_config(
        tmp_path,
        [
            {"content": '{"plan": "p", "todos": ["x"]}'},
            {"tool_calls": [{"name": "shout", "args": {"text": "hey"}}]},
            {"content": "done"},
        ],
        tools={"custom": [{"path": "tests.support.user_tools:shout", "effect": "read_only"}]},
    )
    runner = AgentRunner.from_config(cfg)
    assert runner.tools["shout"].effect == "read_only"
    result = runner.run("shout")
    state = runner.state(result.session_id)
    assert [m.content for m in state["messages"] if m.type == "tool"] == ["HEY"]
