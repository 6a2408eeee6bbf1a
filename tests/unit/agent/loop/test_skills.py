"""Skills: loaded from the skills folder, activated by the planner or the user, narrowing the tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.errors import ConfigError
from agent.loop.skills import load_skills
from agent.runner import AgentRunner
from tests.support.runners import make_config


def _skills(tmp_path: Path) -> Path:
    d = tmp_path / "skills"
    d.mkdir()
    (d / "math.yaml").write_text(
        "description: arithmetic only\ninstructions: use the calculator\ntools: [calculator]\n"
    )
    (d / "writer").mkdir()
    (d / "writer" / "skill.yaml").write_text("description: writes files\ntools: [write_file]\n")
    (d / "writer" / "SKILL.md").write_text("# Writing\nWrite short files.\n")
    return d


def test_load_yaml_and_folder_skills(tmp_path: Path) -> None:
    """Both skill layouts load; the folder form takes its instructions from SKILL.md."""
    skills = load_skills(_skills(tmp_path))
    assert skills["math"].tools == ("calculator",)
    assert skills["writer"].instructions.startswith("# Writing")


def test_planner_activates_a_skill_and_the_model_sees_its_tools(tmp_path: Path) -> None:
    """A plan naming a skill activates it: its instructions enter the prompt and only its tools are bound."""
    script = [
        {"content": '{"plan": "add", "todos": ["add"], "skill": "math"}'},
        {"tool_calls": [{"name": "calculator", "args": {"expression": "2+3"}}]},
        {"content": "5"},
    ]
    runner = AgentRunner.from_config(make_config(tmp_path, script, skills_dir=str(_skills(tmp_path))))
    result = runner.run("add two and three")
    assert result.answer == "5"
    assert runner.state(result.session_id)["active_skill"] == "math"
    rt = runner.builder.last_runtime(result.session_id)
    assert rt is not None
    assert {t.name for t in rt.visible_tools()} == {"calculator", "read_tool_result", "update_todo"}
    prompt = rt.model.calls[-1]  # type: ignore[attr-defined]
    assert "## Skill: math" in prompt[0].content and "use the calculator" in prompt[0].content


def test_user_activates_a_skill(tmp_path: Path) -> None:
    """`run(..., skill=...)` activates it for the turn."""
    script = [{"content": '{"plan": "p", "todos": ["x"]}'}, {"content": "ok"}]
    runner = AgentRunner.from_config(make_config(tmp_path, script, skills_dir=str(_skills(tmp_path))))
    result = runner.run("write", skill="writer")
    assert runner.state(result.session_id)["active_skill"] == "writer"


def test_unknown_skill_is_a_clear_error(tmp_path: Path) -> None:
    """Naming a skill that does not exist lists the ones that do."""
    runner = AgentRunner.from_config(make_config(tmp_path, [], skills_dir=str(_skills(tmp_path))))
    with pytest.raises(ConfigError, match="math, writer"):
        runner.run("x", skill="nope")


def test_skill_with_unknown_tool_is_refused(tmp_path: Path) -> None:
    """A skill allowing a tool the toolset lacks fails at start-up, naming it."""
    d = _skills(tmp_path)
    (d / "bad.yaml").write_text("description: x\ntools: [no_such_tool]\n")
    with pytest.raises(ConfigError, match="no_such_tool"):
        AgentRunner.from_config(make_config(tmp_path, [], skills_dir=str(d)))


def test_skill_definitions_are_part_of_the_surface(tmp_path: Path) -> None:
    """Changing a skill's definition changes the surface digest (so recovery notices)."""
    d = _skills(tmp_path)
    a = AgentRunner.from_config(make_config(tmp_path, [], skills_dir=str(d))).pins.surface_digest
    (d / "math.yaml").write_text("description: arithmetic only\ninstructions: changed\ntools: [calculator]\n")
    b = AgentRunner.from_config(make_config(tmp_path, [], skills_dir=str(d))).pins.surface_digest
    assert a != b
