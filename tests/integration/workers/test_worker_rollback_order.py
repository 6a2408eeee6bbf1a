"""A thread's first turn rolled back on a real Celery worker while another submitter's turn is queued
behind it: the queued turn runs after the rollback, on the thread made empty again, never on the
state of the run that was undone, and it is not lost with the thread's old records.

The first turn plans and calls `gate`, which blocks while the test holds the thread's gate (so the
rollback lands mid-run). Then, with no barrier between them, one plain thread queues the second
turn as `agentrt submit` does and another cancels the first run with `action="rollback"` through
`langgraph_sdk`; the gate opens. Repeated on fresh threads: whichever lands first, the worker
renews the thread before it takes the queued turn. On the files store and on PostgreSQL's (where
a reader that kept the inbox's stream id finds the renewed inbox all the same).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError

from agent.core.errors import SessionNotFound
from agent.runner.submit import TurnHandle, submit_turn
from agent.session.inbox import TurnStatus
from tests.support.celery_drill import Cluster
from tests.support.serve import Server
from tests.support.worker_serve import served_cluster

BOUND_S = 120.0
ROUNDS = 3
KEY = "rollback-order-key-0123456789"
SCRIPT = [  # the model's calls along a branch: a renewed thread plays it again from the start
    {"content": json.dumps({"plan": "Answer it.", "todos": ["Answer"]})},
    {"tool_calls": [{"name": "gate", "args": {}}]},
    {"content": "Answered."},
]


@pytest.fixture(params=["files", "postgres"])
def on_workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Cluster, Server]]:
    """A cluster (unique queue, Redis prefixes, PG schema; on the files store or PostgreSQL's) with
    one worker, and a server on its config."""
    with served_cluster(tmp_path, SCRIPT, KEY, store=request.param) as (cluster, server):
        yield cluster, server


def _wait_for(cluster: Cluster, key: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not cluster.redis.exists(key):
        assert time.monotonic() < deadline, f"{key} never appeared\n{cluster.log_tail()}"
        time.sleep(0.05)


def _submit(cluster: Cluster, tid: str, text: str) -> TurnHandle:
    """`agentrt submit --session tid`: refused while the thread is being made again; then sent again."""
    deadline = time.monotonic() + BOUND_S
    while True:
        try:
            return submit_turn(cluster.settings, text, tid, cluster.tenant)
        except SessionNotFound:
            assert time.monotonic() < deadline, f"thread {tid} never came back"
            time.sleep(0.01)


def _queue_and_roll_back(cluster: Cluster, client: SyncLangGraphClient, tid: str, run_id: str) -> TurnHandle:
    """At once, from two plain threads: another submitter queues a turn, the API client cancels
    `run_id` with a rollback; then the gate opens. The queued turn's handle."""
    queued: list[TurnHandle] = []
    submitter = threading.Thread(target=lambda: queued.append(_submit(cluster, tid, "Second question.")))
    canceller = threading.Thread(target=lambda: client.runs.cancel(tid, run_id, action="rollback"))
    submitter.start()
    canceller.start()
    canceller.join(BOUND_S)
    cluster.redis.delete(f"{cluster.keys}:gate:{tid}")
    submitter.join(BOUND_S)
    assert queued, "the second turn was submitted"
    return queued[0]


def _humans(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values.get("messages") or [] if m["type"] == "human"]


def test_a_turn_queued_behind_a_rolled_back_first_turn_runs_on_the_renewed_thread(on_workers):
    cluster, server = on_workers
    client = get_sync_client(url=server.url, api_key=KEY)
    for round_no in range(ROUNDS):
        tid = client.threads.create(metadata={"round": round_no})["thread_id"]
        cluster.redis.set(f"{cluster.keys}:gate:{tid}", 1)
        first = client.runs.create(tid, "agentrt", input={"user_input": "First question."})
        _wait_for(cluster, f"{cluster.keys}:reached:{tid}")

        second = _queue_and_roll_back(cluster, client, tid, first["run_id"]).wait(timeout=BOUND_S)
        assert second.status is TurnStatus.COMPLETED, (second.result, cluster.log_tail())
        rolled = cluster.turns(tid)[0]
        assert rolled.status is TurnStatus.FAILED and rolled.result["rollback"] == "renewed", rolled.result

        # The queued turn ran on the empty thread: the undone run left nothing in its state.
        state = client.threads.get_state(tid)
        assert _humans(state["values"]) == ["Second question."], state["values"]
        assert state["values"]["messages"][-1]["content"] == "Answered."
        history = client.threads.get_history(tid, limit=100)
        assert all("First question." not in _humans(h["values"]) for h in history)
        thread = client.threads.get(tid)
        assert thread["metadata"]["round"] == round_no and thread["status"] == "idle"
        with pytest.raises(NotFoundError):
            client.runs.get(tid, first["run_id"])
