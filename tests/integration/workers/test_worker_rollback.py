"""Rollback with the runs on a real Celery worker (`serve.runs_on: workers`, Redis broker), through the
real `langgraph_sdk` client: `multitask_strategy: rollback` and `runs.cancel(action="rollback")`
stop the worker's run at its next step and the worker moves the thread back to before it (a fork
at the entry before the run began), before any other turn of the thread can start. The rolled-back
run is gone from the API; its entries stay on the branch left, as `agentrt show` has them.

Turn 1 plans and answers; turn 2 plans and calls `gate`, which blocks while the test holds the
thread's gate (so the rollback lands mid-run at a known step). The scripted model answers by the
branch's model calls, so the turn after the rollback plays turn 2's script again (the gate open by
then) and answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError

from agent.session.inbox import TurnStatus
from tests.support.celery_drill import Cluster
from tests.support.serve import Server
from tests.support.worker_serve import served_cluster

BOUND_S = 120.0
KEY = "rollback-test-key-0123456789"
PLAN = {"content": json.dumps({"plan": "Answer it.", "todos": ["Answer"]})}
SCRIPT = [
    PLAN,
    {"content": "Answer 1."},
    PLAN,
    {"tool_calls": [{"name": "gate", "args": {}}]},
    {"content": "Answer 3."},
]


@pytest.fixture
def on_workers(tmp_path: Path) -> Iterator[tuple[Cluster, Server]]:
    """A cluster (unique queue, Redis prefixes, PG schema) with one worker, and a server on its config."""
    with served_cluster(tmp_path, SCRIPT, KEY) as (cluster, server):
        yield cluster, server


def _wait_for(r: redis.Redis, key: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not r.exists(key):
        assert time.monotonic() < deadline, f"{key} never appeared"
        time.sleep(0.05)


def _humans(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values.get("messages") or [] if m["type"] == "human"]


def _answered_then_gated(cluster: Cluster, client: SyncLangGraphClient) -> tuple[str, dict[str, Any], str]:
    """A thread with turn 1 answered and turn 2 waiting in `gate` on the worker: (thread, state after
    turn 1, turn 2's run id)."""
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "agentrt", input={"user_input": "First question."})
    before = client.threads.get_state(tid)
    assert before["values"]["messages"][-1]["content"] == "Answer 1."
    cluster.redis.set(f"{cluster.keys}:gate:{tid}", 1)
    gated = client.runs.create(tid, "agentrt", input={"user_input": "Pass the gate."})
    _wait_for(cluster.redis, f"{cluster.keys}:reached:{tid}")
    return tid, before, gated["run_id"]


def test_a_run_with_rollback_removes_the_workers_run_and_runs_from_before_it(on_workers):
    cluster, server = on_workers
    client = get_sync_client(url=server.url, api_key=KEY)
    tid, before, gated = _answered_then_gated(cluster, client)
    first = client.runs.list(tid)[-1]  # the oldest: turn 1

    new = client.runs.create(tid, "agentrt", input={"user_input": "Never mind."}, multitask_strategy="rollback")
    cluster.redis.delete(f"{cluster.keys}:gate:{tid}")
    client.runs.join(tid, new["run_id"])

    # The rolled-back run is gone; the new one ran from the state before it.
    with pytest.raises(NotFoundError):
        client.runs.get(tid, gated)
    assert [(r["run_id"], r["status"]) for r in client.runs.list(tid)] == [
        (new["run_id"], "success"),
        (first["run_id"], "success"),
    ]
    values = client.threads.get_state(tid)["values"]
    assert _humans(values) == ["First question.", "Never mind."]
    assert values["messages"][-1]["content"] == "Answer 3."
    assert len([m for m in values["messages"] if m["type"] == "tool"]) == 1  # the new turn's: the old one is gone
    history = client.threads.get_history(tid, limit=100)
    assert all("Pass the gate." not in _humans(h["values"]) for h in history)
    assert before["checkpoint"]["checkpoint_id"] in [h["checkpoint"]["checkpoint_id"] for h in history]
    thread = client.threads.get(tid)
    assert thread["status"] == "idle" and thread["branch_id"] != "main"
    # The worker made the fork when it stopped the run, before it took the next turn.
    stopped, answered = cluster.turns(tid)[1:]
    assert stopped.status is TurnStatus.FAILED and stopped.result["rollback"] == "forked"
    assert answered.status is TurnStatus.COMPLETED and answered.options == {"discard_unfinished": True}


def test_cancel_with_rollback_puts_the_thread_back_as_it_was_before_the_run(on_workers):
    cluster, server = on_workers
    client = get_sync_client(url=server.url, api_key=KEY)
    tid, before, gated = _answered_then_gated(cluster, client)

    client.runs.cancel(tid, gated, action="rollback")
    cluster.redis.delete(f"{cluster.keys}:gate:{tid}")
    deadline = time.monotonic() + BOUND_S
    while gated in [r["run_id"] for r in client.runs.list(tid)]:
        assert time.monotonic() < deadline, client.runs.list(tid)
        time.sleep(0.1)

    with pytest.raises(NotFoundError):
        client.runs.get(tid, gated)
    after = client.threads.get_state(tid)
    assert after["values"] == before["values"]
    assert after["checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]
    assert client.threads.get(tid)["status"] == "idle"
    assert cluster.turns(tid)[1].result["rollback"] == "forked"

    # The thread goes on from there, on the worker.
    values = client.runs.wait(tid, "agentrt", input={"user_input": "Next question."})
    assert _humans(values) == ["First question.", "Next question."]
    assert values["messages"][-1]["content"] == "Answer 3."
