"""Kill `agentrt serve` mid-run (SIGKILL), start it again: the run is resumable and the client continues it."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from tests.support.serve import cli, slow_config, start_server

ANSWER = "Rested four times."


def _tool_results(client, tid: str) -> int:
    msgs = client.threads.get_state(tid)["values"].get("messages") or []
    return sum(1 for m in msgs if m["type"] == "tool")


def test_killed_server_leaves_a_resumable_run_that_the_client_continues(tmp_path: Path):
    config = slow_config(tmp_path)
    server = start_server(config, tmp_path)
    try:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "agentrt", input={"user_input": "rest"})
        deadline = time.monotonic() + 30
        while _tool_results(client, tid) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _tool_results(client, tid) >= 1
    finally:
        server.kill()

    server = start_server(config, tmp_path)
    try:
        client = get_sync_client(url=server.url)
        assert client.threads.get(tid)["status"] == "interrupted"
        assert [(r["run_id"], r["status"]) for r in client.runs.list(tid)] == [(run["run_id"], "interrupted")]
        state = client.threads.get_state(tid)
        assert state["next"] or state["tasks"]

        values = client.runs.wait(tid, "agentrt", input=None)
        assert values["finish_reason"] == "completed"
        assert [m for m in values["messages"] if m["type"] == "ai"][-1]["content"] == ANSWER
        # The continuation is a run of its own; the killed run keeps its id and stays interrupted.
        continued, killed = client.runs.list(tid)
        assert (killed["run_id"], killed["status"]) == (run["run_id"], "interrupted")
        assert continued["run_id"] != run["run_id"] and continued["status"] == "success"
        assert client.threads.get(tid)["status"] == "idle"
    finally:
        server.stop()
    shown = cli(config, tmp_path, "show", tid, "--json", "--last", "200")
    types = [e["type"] for e in json.loads(shown.stdout)["entries"]]
    assert "run_resume" in types and types[-1] == "run_end"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_at_a_random_instant_then_continue(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    config = slow_config(tmp_path)
    server = start_server(config, tmp_path)
    try:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        client.runs.create(tid, "agentrt", input={"user_input": "rest"})
        time.sleep(rng.uniform(0.0, 4.5))
    finally:
        server.kill()
    server = start_server(config, tmp_path)
    try:
        client = get_sync_client(url=server.url)
        values = client.runs.wait(tid, "agentrt", input=None)
        assert values["finish_reason"] == "completed", values
        assert [m for m in values["messages"] if m["type"] == "ai"][-1]["content"] == ANSWER
        assert sum(1 for m in values["messages"] if m["type"] == "tool") == 4
    finally:
        server.stop()
