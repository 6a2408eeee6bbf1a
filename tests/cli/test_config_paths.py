"""A config works wherever it sits, and one that points at nothing is refused at start.

The built-in defaults name the shipped demo files as `builtin:...` (agent/assets/), so a copy of
configs/default.yaml in any folder, or an empty config file, runs the demo; a path a user writes is
relative to the config's folder; a missing model script, dataset file or skills folder exits 2 with
one line naming the key and the path, and leaves nothing on disk.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.cli.console import ROOT, agentrt

DEFAULT = ROOT / "configs" / "default.yaml"
TASK = "Summarise the 2026 sales by region"
TOTAL = "45827.34"  # the demo's revenue total: only a run that read both datasets can give it


def _demo(config: Path, work: Path) -> dict[str, Any]:
    """`agentrt run --approve-all --json` with `config`, from `work`: the result, after checking it."""
    ran = agentrt("run", "--config", str(config), "--approve-all", "--json", TASK, cwd=work)
    assert ran.code == 0, ran.both
    result: dict[str, Any] = json.loads(ran.out)
    assert result["status"] == "COMPLETED", result
    return result


def _failed_tools(work: Path, config: Path, session_id: str) -> list[str]:
    """The tool results of the session that are errors (a dataset the run could not read shows here)."""
    ran = agentrt("show", session_id, "--json", "--config", str(config), cwd=work)
    assert ran.code == 0, ran.both
    text = json.dumps(json.loads(ran.out))
    return [m for m in ("not found; check the dataset path", "unknown dataset") if m in text]


def test_a_copy_of_the_default_config_in_another_folder_runs_the_demo(tmp_path: Path) -> None:
    """configs/default.yaml copied elsewhere (and run from a third folder) finds the shipped demo."""
    elsewhere, work = tmp_path / "elsewhere", tmp_path / "work"
    elsewhere.mkdir()
    work.mkdir()
    config = Path(shutil.copy(DEFAULT, elsewhere / "agent.yaml"))
    result = _demo(config, work)
    assert TOTAL in result["answer"]
    assert _failed_tools(work, config, result["session_id"]) == []


def test_an_empty_config_file_runs_the_demo(tmp_path: Path) -> None:
    """An empty file is the built-in defaults: the same demo, the same answer."""
    config = tmp_path / "empty.yaml"
    config.write_text("")
    result = _demo(config, tmp_path)
    assert TOTAL in result["answer"]
    assert (tmp_path / ".agentrt").is_dir()  # base_dir stays relative to where the command runs


def test_a_path_the_user_writes_is_relative_to_the_config(tmp_path: Path) -> None:
    """`path: sales.csv` is the file beside the config, whatever the working directory."""
    folder, work = tmp_path / "cfg", tmp_path / "work"
    folder.mkdir()
    work.mkdir()
    shutil.copy(ROOT / "agent" / "assets" / "datasets" / "sales.csv", folder / "sales.csv")
    data = yaml.safe_load(DEFAULT.read_text())
    data["datasets"][0]["path"] = "sales.csv"
    config = folder / "mine.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    result = _demo(config, work)
    assert TOTAL in result["answer"]


def _refused(tmp_path: Path, key_path: str, **changes: Any) -> str:
    """The one error line of `run` with configs/default.yaml changed; checks exit 2 and no trace."""
    data = yaml.safe_load(DEFAULT.read_text())
    data.update(changes)
    config = tmp_path / "cfg" / "bad.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    work = tmp_path / "work"
    work.mkdir()
    for args in (["run", TASK], ["sessions"]):
        ran = agentrt(*args, "--config", str(config), cwd=work)
        assert ran.code == 2, ran.both
        line = ran.error_line()
        assert line.startswith(f"agentrt: error: {key_path}: "), line
        assert f"(fix the path in {config})" in line, line
        assert list(work.iterdir()) == [], "a refused command left files behind"
    return line


def test_a_dataset_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    """datasets[1].path pointing at nothing: exit 2, one line with the key and the absolute path."""
    regions = {"name": "regions", "path": "data/regions.json", "format": "json"}
    sales = yaml.safe_load(DEFAULT.read_text())["datasets"][0]
    line = _refused(tmp_path, "datasets[1].path", datasets=[sales, regions])
    assert f"{tmp_path / 'cfg' / 'data' / 'regions.json'} does not exist" in line


def test_a_skills_dir_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    """skills_dir pointing at nothing is no longer ignored: exit 2, one line with key and path."""
    line = _refused(tmp_path, "skills_dir", skills_dir="my-skills")
    assert f"{tmp_path / 'cfg' / 'my-skills'} does not exist" in line


def test_a_missing_script_next_to_the_config_is_refused_not_replaced(tmp_path: Path) -> None:
    """An explicit relative model.script that is absent is an error, never the shipped demo instead."""
    data = yaml.safe_load(DEFAULT.read_text())
    model = {**data["model"], "script": "scripts/demo.yaml"}  # the old relative spelling
    line = _refused(tmp_path, "model.script", model=model)
    assert f"{tmp_path / 'cfg' / 'scripts' / 'demo.yaml'} does not exist" in line


def test_an_unknown_builtin_name_lists_what_is_shipped(tmp_path: Path) -> None:
    """`builtin:` names only shipped files: a wrong one says which exist."""
    config = tmp_path / "bad.yaml"
    config.write_text("skills_dir: builtin:skill\n")
    ran = agentrt("sessions", "--config", str(config), cwd=tmp_path)
    assert ran.code == 2, ran.both
    line = ran.error_line()
    assert "skills_dir: builtin:skill is not shipped with agentrt" in line and "skills/data-analyst.yaml" in line
    assert not (tmp_path / ".agentrt").exists()
