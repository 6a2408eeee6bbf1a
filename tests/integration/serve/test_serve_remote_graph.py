"""agentrt as a subgraph: a parent LangGraph graph whose node is `RemoteGraph("agentrt", url=...)`.

The demo's run stops for approval before publishing; the parent graph is interrupted with that
approval, and resumed with `Command(resume={interrupt_id: answer})` its node sends the parent's
input again, the answer riding in the config: the run goes on and the parent finishes. The same
flow runs against `langgraph dev` on the same graph, as the reference. Ordinary clients keep
agentrt's rule: new input on a thread that waits for an answer is refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_sync_client

from tests.support.langgraph_dev import langgraph_dev, needs_langgraph_cli
from tests.support.runners import make_config
from tests.support.serve import serving

ASK = "Summarise the sales"
APPROVE = {"approved": True}


@contextmanager
def _server(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "agentrt":
        with serving(make_config(tmp_path), tmp_path) as server:
            yield server.url
    else:
        with langgraph_dev(tmp_path, make_config(tmp_path)) as url:
            yield url


def _parent(url: str) -> Any:
    """A parent graph whose one node is the remote agentrt graph (its thread: the parent's id)."""
    builder = StateGraph(MessagesState)
    builder.add_node("agentrt", RemoteGraph("agentrt", url=url))
    builder.add_edge(START, "agentrt")
    builder.add_edge("agentrt", END)
    return builder.compile(checkpointer=InMemorySaver())


def _paused(parent: Any, url: str) -> tuple[dict[str, Any], str]:
    """A parent run stopped at the remote run's approval: its config and the interrupt's id."""
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    parent.invoke({"messages": [{"role": "user", "content": ASK}]}, config)
    (interrupt,) = parent.get_state(config).interrupts
    assert interrupt.value["name"] == "publish_report"
    remote = get_sync_client(url=url).threads.get_state(config["configurable"]["thread_id"])
    assert remote["next"] == ["acting"]
    return config, interrupt.id


@pytest.mark.parametrize("kind", ["agentrt", pytest.param("langgraph-dev", marks=needs_langgraph_cli)])
def test_a_parent_graph_resumed_with_the_interrupt_id_finishes_the_remote_run(kind: str, tmp_path: Path) -> None:
    with _server(kind, tmp_path) as url:
        parent = _parent(url)
        config, iid = _paused(parent, url)

        out = parent.invoke(Command(resume={iid: APPROVE}), config)

        assert parent.get_state(config).next == ()
        remote = get_sync_client(url=url).threads.get_state(config["configurable"]["thread_id"])
        assert remote["next"] == [] and remote["values"]["finish_reason"] == "completed"
        assert out["messages"][-1].content == remote["values"]["messages"][-1]["content"]
        # The input sent again with the answer started no second turn.
        humans = [m for m in remote["values"]["messages"] if m["type"] == "human"]
        assert [m["content"] for m in humans] == [ASK]


@pytest.mark.parametrize("kind", ["agentrt", pytest.param("langgraph-dev", marks=needs_langgraph_cli)])
def test_a_bare_resume_value_never_reaches_the_remote_run(kind: str, tmp_path: Path) -> None:
    """Resumed with a bare value, the parent's node carries no answer: `langgraph dev` asks the
    same question again; agentrt refuses the request, naming the interrupt id to resume with."""
    with _server(kind, tmp_path) as url:
        parent = _parent(url)
        config, iid = _paused(parent, url)
        if kind == "agentrt":
            with pytest.raises(httpx.HTTPStatusError) as refused:
                parent.invoke(Command(resume=APPROVE), config)
            assert refused.value.response.status_code == 422
            assert f"Command(resume={{'{iid}': answer}})" in refused.value.response.json()["detail"]
        else:
            parent.invoke(Command(resume=APPROVE), config)
            (again,) = parent.get_state(config).interrupts
            assert again.value["name"] == "publish_report"
        remote = get_sync_client(url=url).threads.get_state(config["configurable"]["thread_id"])
        assert remote["next"] == ["acting"]  # still waiting; the id form still finishes it
        (pending,) = parent.get_state(config).interrupts
        parent.invoke(Command(resume={pending.id: APPROVE}), config)
        assert parent.get_state(config).next == ()


def test_ordinary_clients_still_cannot_send_input_to_a_waiting_thread(tmp_path: Path) -> None:
    """Without the RemoteGraph resume, new input on a paused thread is refused; input with a
    `command` runs the command and ignores the input, as LangGraph's server does."""
    with serving(make_config(tmp_path), tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "agentrt", input={"user_input": ASK})
        with pytest.raises(httpx.HTTPStatusError) as refused:
            client.runs.wait(tid, "agentrt", input={"user_input": "something else"})
        assert "is PAUSED" in refused.value.response.json()["detail"]
        # The resume flag alone on a thread that does not wait changes nothing: a new thread runs its input.
        fresh = client.threads.create()["thread_id"]
        flagged = {"configurable": {"__pregel_resuming": True}}
        client.runs.wait(fresh, "agentrt", input={"user_input": ASK}, config=flagged)
        assert client.threads.get_state(fresh)["next"] == ["acting"]

        client.runs.wait(tid, "agentrt", input={"user_input": "ignored"}, command={"resume": APPROVE})
        state = client.threads.get_state(tid)
        assert state["next"] == [] and state["values"]["finish_reason"] == "completed"
        assert "ignored" not in [m["content"] for m in state["values"]["messages"]]
