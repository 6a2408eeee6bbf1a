"""The pins kept of a runner are the pins the doctor reads back without building one."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.config import load_settings
from agent.loop import surface_cache
from tests.support.runners import make_config, make_runner


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_nothing_is_known_before_a_doctor_built_a_runner(tmp_path: Path) -> None:
    """A fresh cache: the doctor must build the runtime."""
    assert surface_cache.pins(load_settings(make_config(tmp_path))) is None


def _folder(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name


def test_the_pins_read_back_are_the_runners(tmp_path: Path) -> None:
    """Built once, a runner's pins are read back equal, for its settings and for settings that
    differ only in what the pins take from the settings themselves (prompt, compression)."""
    runner = make_runner(_folder(tmp_path, "a"))
    surface_cache.remember(runner.settings, runner.pins)
    assert surface_cache.pins(runner.settings) == runner.pins
    other = make_runner(_folder(tmp_path, "b"), loop={"system_prompt": "Be brief."}, compression={"keep_full_mid": 5})
    assert other.pins != runner.pins
    assert surface_cache.pins(other.settings) == other.pins


def test_other_tools_are_another_entry(tmp_path: Path) -> None:
    """Kept pins are never taken for another toolset."""
    runner = make_runner(_folder(tmp_path, "a"))
    surface_cache.remember(runner.settings, runner.pins)
    fewer = load_settings(make_config(_folder(tmp_path, "b"), tools={"builtins": ["calculator"]}))
    assert surface_cache.pins(fewer) is None
