"""AgentRunner holds a Runner; a new turn and a resume are parts of that Runner (`starts`, `resumes`)."""

from __future__ import annotations

from pathlib import Path

from agent.runner import AgentRunner
from agent.runner.base_runner import Runner
from agent.runner.resume import Resume
from agent.runner.start import TurnStart
from agent.runner.streaming import final
from tests.support.runners import make_config


def test_agent_runner_holds_a_runner_and_shares_its_parts(tmp_path: Path) -> None:
    """Not a subclass: the facade's settings, saver, graph and sessions are its Runner's."""
    runner = AgentRunner.from_config(make_config(tmp_path))
    assert not isinstance(runner, Runner)
    assert isinstance(runner.runner, Runner)
    assert isinstance(runner.runner.starts, TurnStart) and isinstance(runner.runner.resumes, Resume)
    assert runner.settings is runner.runner.settings
    assert runner.saver is runner.runner.saver
    assert runner.graph is runner.runner.graph
    assert runner.manager is runner.runner.manager


def test_a_turn_and_its_resume_run_through_the_runner_parts(tmp_path: Path) -> None:
    """The demo turn started on `starts` pauses for approval; `resumes` finishes it, as the facade does."""
    parts = AgentRunner.from_config(make_config(tmp_path)).runner
    paused = final(parts.starts.stream("please summarise the sales", None, None, None, None))
    assert paused.status == "PAUSED"
    done = final(parts.resumes.stream(paused.session_id, None, None, {"approved": True}, (), None, None))
    assert done.status == "COMPLETED"
    assert "45827.34" in done.answer
