"""`agentrt serve` with the production-like config: runs execute on a real Celery worker (Redis broker)
and stream back to the real `langgraph_sdk` client; the embedded default still runs in the server.

One session, scripted: turn 1 plans, asks to run `bump_approved` (approval), then answers; turn 2
plans, calls `gate` (blocks while the test holds the session's gate, so the cancel lands mid-run at
a known step), then answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError

from agent.serve.crons import iso
from agent.session.inbox import TurnStatus
from tests.support.celery_drill import Cluster
from tests.support.cron_tools import make_due, strand
from tests.support.runners import make_config
from tests.support.serve import Server, cli, serving
from tests.support.worker_serve import served_cluster

BOUND_S = 120.0
KEY = "worker-test-key-0123456789"
PLAN = {"content": json.dumps({"plan": "Use the tool, then answer.", "todos": ["Use the tool"]})}
SCRIPT = [
    PLAN,
    {"tool_calls": [{"name": "bump_approved", "args": {"note": "turn 1"}}]},
    {"content": "Answer 1."},
    PLAN,
    {"tool_calls": [{"name": "gate", "args": {}}]},
    {"content": "Answer 2."},
]


@pytest.fixture
def on_workers(tmp_path: Path) -> Iterator[tuple[Cluster, Server]]:
    """A cluster (unique queue, Redis prefixes, PG schema) with one worker, and a server on its config."""
    with served_cluster(tmp_path, SCRIPT, KEY) as (cluster, server):
        yield cluster, server


GATED = [PLAN, {"tool_calls": [{"name": "gate", "args": {}}]}, PLAN, {"content": "Answer 2."}]


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[Cluster, Server]]:
    """As `on_workers`, on a script whose first turn waits in `gate`, then a plan and an answer."""
    with served_cluster(tmp_path, GATED, KEY) as (cluster, server):
        yield cluster, server


def _is_worker(executor: str, cluster: Cluster, server: Server) -> bool:
    return executor.startswith(f"w1-{cluster.tenant}@") and not executor.endswith(f":{server.proc.pid}")


def _wait_for(r: redis.Redis, key: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not r.exists(key):
        assert time.monotonic() < deadline, f"{key} never appeared"
        time.sleep(0.05)


def test_runs_execute_on_the_worker_stream_answer_cancel_and_continue(on_workers):
    cluster, server = on_workers
    client = get_sync_client(url=server.url, api_key=KEY)
    tid = client.threads.create()["thread_id"]

    # Turn 1 streams from the worker in every mode the in-process path gives, up to its approval.
    parts = list(
        client.runs.stream(
            tid, "agentrt", input={"user_input": "Bump it once."},
            stream_mode=["values", "updates", "messages-tuple", "custom", "events"],
        )
    )  # fmt: skip
    assert parts[0].event == "metadata"
    run1 = parts[0].data["run_id"]
    assert {"values", "updates", "messages", "custom", "events"} <= {p.event for p in parts}
    asked = [p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in p.data]
    assert asked and asked[0][0]["value"]["name"] == "bump_approved"
    assert parts[-1].event == "values" and parts[-1].data["__interrupt__"][0]["value"]["name"] == "bump_approved"
    ended = [p.data["name"] for p in parts if p.event == "events" and p.data.get("event") == "on_chain_end"]
    assert ended[:3] == ["init", "planning", "reasoning"]
    executor = client.runs.get(tid, run1)["metadata"]["executed_by"]
    assert _is_worker(executor, cluster, server), executor
    [turn1] = cluster.turns(tid)
    assert turn1.status is TurnStatus.PAUSED and turn1.result["worker"] == executor

    # A new turn while the approval is pending is refused at once (it could never start), as in-process.
    with pytest.raises(ConflictError, match="waiting for a human decision"):
        client.runs.create(tid, "agentrt", input={"user_input": "Something else."})
    with pytest.raises(httpx.HTTPStatusError, match="409 Conflict"):
        client.runs.wait(tid, "agentrt")
    assert len(cluster.turns(tid)) == 1  # nothing was queued

    # The server reads the state the worker wrote (fresh, not a cached copy).
    assert client.threads.get(tid)["status"] == "interrupted"
    assert client.threads.get_state(tid)["next"] == ["acting"]

    # The answer to the approval continues on the worker.
    values = client.runs.wait(tid, "agentrt", command={"resume": {"approved": True}})
    assert values["finish_reason"] == "completed" and "__interrupt__" not in values
    answer, asked_run = client.runs.list(tid)  # the answer is a run of its own
    assert (asked_run["run_id"], asked_run["status"], answer["status"]) == (run1, "success", "success")
    assert _is_worker(answer["metadata"]["executed_by"], cluster, server)
    assert _is_worker(client.runs.get(tid, run1)["metadata"]["executed_by"], cluster, server)
    assert cluster.redis.get(f"{cluster.keys}:bump:{tid}") == b"1"  # the approved tool ran once
    assert client.threads.get(tid)["status"] == "idle"

    # Turn 2: cancelled while the worker waits in `gate`; it stops at that step, resumable.
    gate = f"{cluster.keys}:gate:{tid}"
    cluster.redis.set(gate, 1)
    run2 = client.runs.create(tid, "agentrt", input={"user_input": "Pass the gate."})
    assert _is_worker(run2["metadata"]["executed_by"], cluster, server)
    _wait_for(cluster.redis, f"{cluster.keys}:reached:{tid}")
    client.runs.cancel(tid, run2["run_id"], wait=True)
    assert client.runs.get(tid, run2["run_id"])["status"] == "interrupted"
    cluster.redis.delete(gate)
    joined = client.runs.join(tid, run2["run_id"])
    assert joined.get("finish_reason") != "completed"

    # A run without input continues the cancelled run on the worker, streamed.
    more = list(client.runs.stream(tid, "agentrt", stream_mode="updates"))
    continued = client.runs.get(tid, more[0].data["run_id"])  # a run of its own, the same agentrt run going on
    assert continued["run_id"] != run2["run_id"]
    assert continued["metadata"]["agentrt_run_id"] == client.runs.get(tid, run2["run_id"])["metadata"]["agentrt_run_id"]
    nodes = [n for p in more if p.event == "updates" for n in p.data]
    assert "memory" in nodes or "refining" in nodes
    final = client.threads.get_state(tid)["values"]
    assert final["finish_reason"] == "completed"
    assert _is_worker(client.runs.get(tid, run2["run_id"])["metadata"]["executed_by"], cluster, server)
    texts = [t.text for t in cluster.turns(tid)]
    assert texts == ["Bump it once.", "Pass the gate.", ""]  # the continuation is a queued turn
    cancelled = cluster.turns(tid)[1]
    assert cancelled.status is TurnStatus.FAILED and cancelled.result["run_status"] == "INTERRUPTED"
    assert client.threads.get(tid)["status"] == "idle"


def test_breakpoints_stop_the_run_on_the_worker_and_a_run_without_input_continues(on_workers):
    """`interrupt_after` stops the worker's run after that node; a run without input continues it,
    stopping again where its own `interrupt_before` says, then to the approval and the answer."""
    cluster, server = on_workers
    client = get_sync_client(url=server.url, api_key=KEY)
    tid = client.threads.create()["thread_id"]

    client.runs.wait(tid, "agentrt", input={"user_input": "Bump it once."}, interrupt_after=["planning"])
    state = client.threads.get_state(tid)
    assert state["next"] == ["reasoning"] and state["values"]["task_todo_list"]
    assert client.threads.get(tid)["status"] == "interrupted"
    [stopped] = client.runs.list(tid)
    assert _is_worker(stopped["metadata"]["executed_by"], cluster, server)
    assert cluster.redis.get(f"{cluster.keys}:bump:{tid}") is None  # nothing past the breakpoint ran

    client.runs.wait(tid, "agentrt", interrupt_before=["acting"])
    assert client.threads.get_state(tid)["next"] == ["acting"]
    assert client.threads.get_state(tid)["tasks"][0]["interrupts"] == []  # a breakpoint, not the approval yet

    values = client.runs.wait(tid, "agentrt")
    assert values["__interrupt__"][0]["value"]["name"] == "bump_approved"
    values = client.runs.wait(tid, "agentrt", command={"resume": {"approved": True}})
    assert values["finish_reason"] == "completed"
    assert cluster.redis.get(f"{cluster.keys}:bump:{tid}") == b"1"
    assert all(_is_worker(r["metadata"]["executed_by"], cluster, server) for r in client.runs.list(tid))


def test_a_run_with_input_interrupts_the_workers_run_and_starts_over_it(gated):
    """`multitask_strategy: interrupt`: the worker's run stops at the first step a new turn can
    follow (its tool finishes first), and the new turn runs on a worker over it."""
    cluster, server = gated
    client = get_sync_client(url=server.url, api_key=KEY)
    tid = client.threads.create()["thread_id"]
    gate = f"{cluster.keys}:gate:{tid}"
    cluster.redis.set(gate, 1)
    first = client.runs.create(tid, "agentrt", input={"user_input": "Pass the gate."})
    _wait_for(cluster.redis, f"{cluster.keys}:reached:{tid}")

    second = client.runs.create(
        tid, "agentrt", input={"user_input": "Never mind, answer."}, multitask_strategy="interrupt"
    )
    cluster.redis.delete(gate)
    client.runs.join(tid, second["run_id"])

    assert client.runs.get(tid, first["run_id"])["status"] == "interrupted"
    answered_run = client.runs.get(tid, second["run_id"])
    assert answered_run["status"] == "success", answered_run
    values = client.threads.get_state(tid)["values"]
    assert values["finish_reason"] == "completed" and values["messages"][-1]["content"] == "Answer 2."
    said = [m["content"] for m in values["messages"] if m["type"] == "human"]
    assert said[-1] == "Never mind, answer."
    tool_said = [m["content"] for m in values["messages"] if m["type"] == "tool"]
    assert any(t.startswith("gate passed by") for t in tool_said)  # the running tool finished first
    stopped, answered = cluster.turns(tid)
    assert stopped.status is TurnStatus.FAILED and stopped.result["run_status"] == "INTERRUPTED"
    assert answered.status is TurnStatus.COMPLETED and answered.options == {"discard_unfinished": True}
    assert all(_is_worker(r["metadata"]["executed_by"], cluster, server) for r in client.runs.list(tid))


def test_a_stateless_run_executes_on_the_worker(on_workers):
    cluster, server = on_workers
    client = get_sync_client(url=server.url, api_key=KEY)
    values = client.runs.wait(None, "agentrt", input={"user_input": "Bump it once."}, on_completion="keep")
    assert values["__interrupt__"][0]["value"]["name"] == "bump_approved"
    [thread] = client.threads.search()
    [run] = client.runs.list(thread["thread_id"])
    assert run["status"] == "success" and thread["status"] == "interrupted"
    [turn] = cluster.turns(thread["thread_id"])
    assert turn.status is TurnStatus.PAUSED and turn.result["worker"].startswith(f"w1-{cluster.tenant}@")
    # An assistant's own settings are not offered on the workers: refused before anything is made.
    aid = client.assistants.create("agentrt", context={"model_name": "other"})["assistant_id"]
    refused = httpx.post(
        f"{server.url}/runs/wait", headers={"x-api-key": KEY}, json={"assistant_id": aid, "input": {"user_input": "x"}}
    )
    assert refused.status_code == 422 and "assistant_id" in refused.text
    assert len(client.threads.search()) == 1


def test_a_due_cron_runs_on_the_worker(on_workers):
    """A cron's firing is a run like any other: on the worker when `serve.runs_on` says so."""
    cluster, server = on_workers
    client = get_sync_client(url=server.url, api_key=KEY)
    tid = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(tid, "agentrt", schedule="0 0 1 1 *", input={"user_input": "Bump it once."})
    make_due(cluster.config, cluster.tenant, cron["cron_id"])
    deadline = time.monotonic() + BOUND_S
    while [r["status"] for r in client.runs.list(tid)] != ["success"]:
        assert time.monotonic() < deadline, f"the cron's run did not end: {client.runs.list(tid)}"
        time.sleep(0.2)
    [run] = client.runs.list(tid)
    assert _is_worker(run["metadata"]["executed_by"], cluster, server)
    assert run["metadata"]["cron_id"] == cron["cron_id"]

    # A server that handed the run to the worker and stopped before recording it: the server taking
    # the firing over finds the worker's run and records it; no second run is sent.
    fired_at = _last_run(client, cron["cron_id"])["fired_at"]
    long_ago = iso(datetime.now(UTC) - timedelta(minutes=5)) or ""
    strand(cluster.config, cluster.tenant, cron["cron_id"], fired_at, long_ago)
    while _last_run(client, cron["cron_id"])["run_id"] is None:
        assert time.monotonic() < deadline + BOUND_S, "the firing was not taken over"
        time.sleep(0.2)
    time.sleep(1.0)  # more polls: a second start would show now
    last = _last_run(client, cron["cron_id"])
    assert (last["run_id"], last["status"]) == (run["run_id"], "success")
    assert [r["run_id"] for r in client.runs.list(tid)] == [run["run_id"]]


def _last_run(client: Any, cron_id: str) -> dict[str, Any]:
    return next(c for c in client.crons.search(limit=100) if c["cron_id"] == cron_id)["last_run"]


def test_an_approval_asked_by_a_cli_run_is_answered_through_the_api_on_the_worker(on_workers, tmp_path: Path):
    cluster, server = on_workers
    made = cli(cluster.config, tmp_path, "run", "--json", "--tenant", cluster.tenant, "Bump it once.")
    sid = json.loads(made.stdout)["session_id"]
    assert json.loads(made.stdout)["status"] == "PAUSED", made.stderr
    client = get_sync_client(url=server.url, api_key=KEY)
    assert client.threads.get(sid)["status"] == "interrupted"
    values = client.runs.wait(sid, "agentrt", command={"resume": {"approved": True}})
    assert values["finish_reason"] == "completed"
    [turn] = cluster.turns(sid)  # queued as a continuation with the decision, run by the worker
    assert turn.resume and turn.status is TurnStatus.COMPLETED
    assert turn.result["worker"].startswith(f"w1-{cluster.tenant}@")
    assert cluster.redis.get(f"{cluster.keys}:bump:{sid}") == b"1"


def test_the_embedded_default_runs_in_the_server(tmp_path: Path):
    with serving(make_config(tmp_path), tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "agentrt", input={"user_input": "report revenue by region"})
        assert run["metadata"]["executed_by"].endswith(f":{server.proc.pid}")
        assert run["metadata"]["executed_by"].startswith("server ")
        assert client.runs.join(tid, run["run_id"])["__interrupt__"]
