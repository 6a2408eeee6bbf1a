"""A run from an earlier checkpoint (`checkpoint` / `checkpoint_id` of a run, Studio's "rerun from
here") through `langgraph_sdk` against a real `agentrt serve`: the thread forks there (a new branch,
the original's entries kept byte for byte), the run goes on from it, and the history lists both
branches; a checkpoint the thread lacks is 404, one on a stateless run or with a resume is 422."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.support.serve import Server, answering_config, serving

A = "agentrt"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("fromcheckpoint")
    config = answering_config(tmp)
    with serving(config, tmp) as srv:
        yield srv


@pytest.fixture
def client(server: Server) -> SyncLangGraphClient:
    return get_sync_client(url=server.url)


def _humans(state: dict[str, Any]) -> list[str]:
    return [m["content"] for m in state["values"].get("messages") or [] if m["type"] == "human"]


def _events(server: Server, tid: str) -> bytes:
    found = list(server.log.parent.rglob(f"{tid}/events.jsonl"))  # the server runs in its base folder
    assert len(found) == 1, found
    return found[0].read_bytes()


def test_a_run_from_an_earlier_checkpoint_forks_and_the_history_lists_both_branches(client, server):
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, A, input={"user_input": "one"})
    end_of_one = client.threads.get_state(tid)["checkpoint"]
    client.runs.wait(tid, A, input={"user_input": "two"})
    original = client.threads.get_history(tid, limit=200)
    before = _events(server, tid)

    client.runs.wait(tid, A, input={"user_input": "other two"}, checkpoint=end_of_one)

    state = client.threads.get_state(tid)
    assert _humans(state) == ["one", "other two"]
    assert client.threads.get(tid)["branch_id"] != "main"
    assert _events(server, tid).startswith(before)  # the original branch's entries, byte for byte
    history = client.threads.get_history(tid, limit=200)
    ids = [h["checkpoint"]["checkpoint_id"] for h in history]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)  # newest first, each once
    assert {h["checkpoint"]["checkpoint_id"] for h in original} < set(ids)
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    forks = [h for h in history if (h["parent_checkpoint"] or {}).get("checkpoint_id") == end_of_one["checkpoint_id"]]
    assert len(forks) == 2  # the fork point has a child on each branch
    # Paging with `before` walks the whole history without a gap or a repeat.
    paged, page = [], client.threads.get_history(tid, limit=3)
    while page:
        paged += [h["checkpoint"]["checkpoint_id"] for h in page]
        page = client.threads.get_history(tid, limit=3, before=page[-1]["checkpoint"]["checkpoint_id"])
    assert paged == ids

    # From the head, a run is a plain one: no new branch.
    branch = client.threads.get(tid)["branch_id"]
    client.runs.wait(tid, A, input={"user_input": "three"}, checkpoint_id=state["checkpoint"]["checkpoint_id"])
    assert client.threads.get(tid)["branch_id"] == branch
    assert _humans(client.threads.get_state(tid)) == ["one", "other two", "three"]


def test_unknown_checkpoints_stateless_runs_and_resumes_are_refused(client, server):
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, A, input={"user_input": "one"})
    first = client.threads.get_history(tid, limit=200)[-1]["checkpoint"]
    before = _events(server, tid)
    with pytest.raises(httpx.HTTPStatusError, match="404"):  # runs.wait raises httpx's error
        client.runs.wait(tid, A, input={"user_input": "x"}, checkpoint_id="1f0aaaaa-0000-6000-8000-000000000000")
    body = {"assistant_id": A, "input": {"user_input": "x"}, "checkpoint": first}
    refused = httpx.post(f"{server.url}/runs/wait", json=body, timeout=30)
    assert refused.status_code == 422 and "checkpoint" in refused.text
    resume = {"assistant_id": A, "command": {"resume": {"approved": True}}, "checkpoint": first}
    refused = httpx.post(f"{server.url}/threads/{tid}/runs/wait", json=resume, timeout=30)
    assert refused.status_code == 422 and "checkpoint" in refused.text
    assert _events(server, tid) == before
    assert client.threads.get(tid)["branch_id"] == "main"


def test_a_run_from_a_checkpoint_on_another_branch_forks_from_there(client: SyncLangGraphClient):
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, A, input={"user_input": "one"})
    end_of_one = client.threads.get_state(tid)["checkpoint"]
    client.runs.wait(tid, A, input={"user_input": "two"})
    end_of_two = client.threads.get_state(tid)["checkpoint"]
    client.runs.wait(tid, A, input={"user_input": "other two"}, checkpoint=end_of_one)
    edit_branch = client.threads.get(tid)["branch_id"]

    client.runs.wait(tid, A, input={"user_input": "three"}, checkpoint=end_of_two)  # the original's head

    assert _humans(client.threads.get_state(tid)) == ["one", "two", "three"]
    assert client.threads.get(tid)["branch_id"] not in ("main", edit_branch)
    texts = [_humans(h) for h in client.threads.get_history(tid, limit=500)]
    assert ["one", "other two"] in texts and ["one", "two", "three"] in texts
