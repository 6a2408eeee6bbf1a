"""A fork without new input goes on from the checkpoint, as LangGraph's server does, through
`langgraph_sdk` against a real `agentrt serve`: `state.fork` without `input`, the thread stream's
`run.start` with a checkpoint in its config and no input (the JS SDK's `forkFrom`), and a REST run
with `checkpoint_id` and no input all make a new current branch at that checkpoint and run the
nodes the checkpoint still had next (from a checkpoint with nothing next the run ends at once, the
thread's state that checkpoint's); the branch forked from stays as it was."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.support.serve import Server, answering_config, serving

A = "agentrt"
BOUND_S = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("fork-replay")
    config = answering_config(tmp)
    with serving(config, tmp) as srv:
        yield srv


@pytest.fixture
def client(server: Server) -> SyncLangGraphClient:
    return get_sync_client(url=server.url)


def _said(state: dict[str, Any]) -> list[str]:
    """The conversation (the system prompt left out)."""
    return [m["content"] for m in state["values"].get("messages") or [] if m["type"] != "system"]


def _two_turns(client: SyncLangGraphClient) -> tuple[str, list[dict[str, Any]]]:
    tid = str(client.threads.create()["thread_id"])
    client.runs.wait(tid, A, input={"user_input": "one"})
    client.runs.wait(tid, A, input={"user_input": "two"})
    return tid, client.threads.get_history(tid, limit=100)


def _before_the_answer_to_two(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The checkpoint where "two" was asked and the model has yet to answer it."""
    return next(h for h in history if h["next"] == ["reasoning"] and _said(h)[-1:] == ["two"])


def _end_of_one(history: list[dict[str, Any]]) -> dict[str, Any]:
    return next(h for h in history if not h["next"] and _said(h) == ["one", "Done."])


def _fork_command(server: Server, tid: str, checkpoint_id: str) -> str:
    body = {"id": 1, "method": "state.fork", "params": {"checkpoint_id": checkpoint_id}}
    answer = httpx.post(f"{server.url}/threads/{tid}/commands", json=body, timeout=BOUND_S)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["thread_id"] == tid
    return str(result["run_id"])


def _stream_start(client: SyncLangGraphClient, tid: str, checkpoint_id: str) -> str:
    with client.threads.stream(tid, assistant_id=A) as thread:
        started = thread.run.start(config={"configurable": {"checkpoint_id": checkpoint_id}})
        _ = thread.output
    return str(started["run_id"])


def _rest_run(client: SyncLangGraphClient, tid: str, checkpoint_id: str) -> str:
    return str(client.runs.create(tid, A, input=None, checkpoint_id=checkpoint_id)["run_id"])


WAYS: dict[str, Callable[[SyncLangGraphClient, Server, str, str], str]] = {
    "state.fork": lambda client, server, tid, cp: _fork_command(server, tid, cp),
    "run.start": lambda client, server, tid, cp: _stream_start(client, tid, cp),
    "runs.create": lambda client, server, tid, cp: _rest_run(client, tid, cp),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_a_fork_without_input_runs_again_what_the_checkpoint_had_next(
    client: SyncLangGraphClient, server: Server, way: str
) -> None:
    tid, history = _two_turns(client)
    point = _before_the_answer_to_two(history)
    cp = point["checkpoint"]["checkpoint_id"]
    branch = client.threads.get(tid)["branch_id"]

    run_id = WAYS[way](client, server, tid, cp)
    client.runs.join(tid, run_id)

    assert client.runs.get(tid, run_id)["status"] == "success"
    state = client.threads.get_state(tid)
    assert _said(state) == ["one", "Done.", "two", "Done."] and state["next"] == []
    assert client.threads.get(tid)["branch_id"] != branch
    # The answer is a new one, written on the new branch on top of the fork point.
    assert state["checkpoint"]["checkpoint_id"] not in {h["checkpoint"]["checkpoint_id"] for h in history}
    walk = client.threads.get_history(tid, limit=100)
    ids = [h["checkpoint"]["checkpoint_id"] for h in walk]
    assert cp in ids and ids.index(cp) > 0
    # The branch forked from reads as it was.
    for old in history:
        again = client.threads.get_state(tid, checkpoint_id=old["checkpoint"]["checkpoint_id"])
        assert again["values"] == old["values"] and again["next"] == old["next"]


@pytest.mark.parametrize("way", list(WAYS))
def test_a_fork_without_input_at_a_finished_checkpoint_ends_at_once_with_its_state(
    client: SyncLangGraphClient, server: Server, way: str
) -> None:
    tid, history = _two_turns(client)
    end = _end_of_one(history)

    run_id = WAYS[way](client, server, tid, end["checkpoint"]["checkpoint_id"])
    client.runs.join(tid, run_id)

    assert client.runs.get(tid, run_id)["status"] == "success"
    state = client.threads.get_state(tid)
    assert _said(state) == ["one", "Done."] and state["values"] == end["values"]
    assert client.threads.get(tid)["status"] == "idle"
    # The new branch takes a turn as any other.
    client.runs.wait(tid, A, input={"user_input": "three"})
    assert _said(client.threads.get_state(tid)) == ["one", "Done.", "three", "Done."]
