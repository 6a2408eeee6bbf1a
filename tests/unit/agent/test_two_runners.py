"""Two runners with different configs in one process each drive their own runtime."""

from __future__ import annotations

from pathlib import Path

from agent.runner import AgentRunner
from tests.support.runners import make_config

PLAN = {"content": '{"plan": "p", "todos": ["x"]}'}


def test_each_runner_uses_its_own_model_and_base_dir(tmp_path: Path) -> None:
    """Runner A still answers from config A after runner B was built."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = AgentRunner.from_config(make_config(tmp_path / "a", [PLAN, {"content": "from A"}]))
    b = AgentRunner.from_config(make_config(tmp_path / "b", [PLAN, {"content": "from B"}]))
    assert a.run("hi").answer == "from A"
    assert b.run("hi").answer == "from B"
    assert (tmp_path / "a" / "agentrt" / "tenants").is_dir() and (tmp_path / "b" / "agentrt" / "tenants").is_dir()
