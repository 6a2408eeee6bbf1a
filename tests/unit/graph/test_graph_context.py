"""The LoopRuntime reaches the nodes through LangGraph's context, never through process-wide state."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import graph
from agent.runner import AgentRunner
from graph.build import build_graph
from graph.context import AgentContext
from tests.support.runners import make_config


def test_a_run_without_context_says_how_to_give_one() -> None:
    """The bare graph needs a context: the error names the two ways to give one."""
    g = build_graph(InMemorySaver())
    with pytest.raises(RuntimeError, match=r"AgentRunner.*context=graph\.context\.AgentContext"):
        g.invoke({"user_input": "hi"}, {"configurable": {"thread_id": "s-1"}})


def test_an_empty_context_falls_back_to_the_graphs_default() -> None:
    """A server that sends `{}` as the context gets the graph's default (as `langgraph dev` does)."""
    built: list[str] = []

    def factory(sid: str, state: object, config: object) -> object:
        built.append(sid)
        raise RuntimeError("factory reached")

    g = build_graph(InMemorySaver(), default_context=lambda config: AgentContext(factory))
    with pytest.raises(RuntimeError, match="factory reached"):
        g.invoke({"user_input": "hi"}, {"configurable": {"thread_id": "s-2"}}, context={})  # type: ignore[arg-type]
    assert built == ["s-2"]


def test_two_runners_in_one_process_each_use_their_own_runtime(tmp_path: Path) -> None:
    """Two runners with different models, racing in threads of one process, never see each other's."""
    answers = {}
    runners = {}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        script = [{"content": '{"plan": "p", "todos": ["x"]}'}, {"content": f"answer from {name}"}]
        runners[name] = AgentRunner.from_config(make_config(tmp_path / name, script))
        assert runners[name].manager is not None  # stores opened here: the race is about the runtimes

    def run(name: str) -> None:
        answers[name] = runners[name].run("go", new_session_id="same-id").answer

    threads = [threading.Thread(target=run, args=(n,)) for n in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == {"a": "answer from a", "b": "answer from b"}


def test_no_runtime_registry_is_left() -> None:
    """The process-wide registry module is gone (graph/runtime.py)."""
    assert not (Path(graph.__file__).parent / "runtime.py").exists()
