"""`langgraph dev` (the Studio API server) runs the agent graph offline, on loopback, with our saver."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from checkpointing.saver import JsonlCheckpointSaver
from tests.support.langgraph_dev import langgraph_dev, needs_langgraph_cli
from tests.support.runners import make_config

pytestmark = needs_langgraph_cli

RUN_BOUND_S = 60.0
SCRIPT: list[dict[str, Any]] = [
    {"content": json.dumps({"plan": "Compute, write it down, answer.", "todos": ["Compute the sum", "Write it down"]})},
    {
        "tool_calls": [
            {"name": "calculator", "args": {"expression": "19 + 23"}},
            {"name": "update_todo", "args": {"todo_id": "t1", "status": "done"}},
        ]
    },
    {
        "tool_calls": [
            {"name": "write_file", "args": {"path": "sum.txt", "content": "42\n"}},
            {"name": "update_todo", "args": {"todo_id": "t2", "status": "done"}},
        ]
    },
    {"content": "The sum is 42; I wrote it to sum.txt."},
]


@contextmanager
def _serve(tmp_path: Path, config: Path) -> Iterator[tuple[httpx.Client, Path]]:
    """A `langgraph dev` server and an HTTP client on it; the base_dir of `config` beside."""
    with langgraph_dev(tmp_path, config) as url, httpx.Client(base_url=url, timeout=30.0) as client:
        yield client, tmp_path / "agentrt"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    """The server on a short scripted task (plan, calculator, file, answer)."""
    tmp_path = tmp_path_factory.mktemp("studio")
    with _serve(tmp_path, make_config(tmp_path, SCRIPT)) as served:
        yield served


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    """The server on the default demo (datasets, a skill, an approval before publishing)."""
    tmp_path = tmp_path_factory.mktemp("studio-demo")
    with _serve(tmp_path, make_config(tmp_path)) as served:
        yield served


def _wait_run(client: httpx.Client, thread_id: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_BOUND_S
    while True:
        run = client.get(f"/threads/{thread_id}/runs/{run_id}").json()
        if run["status"] not in ("pending", "running"):
            return dict(run)
        assert time.monotonic() < deadline, f"run still {run['status']}"
        time.sleep(0.3)


@pytest.mark.parametrize(
    "graph_input",
    [{"messages": [{"type": "human", "content": "add 19 and 23"}]}, {"user_input": "add 19 and 23"}],
    ids=["studio-chat-messages", "user-input"],
)
def test_a_run_through_the_server_api_executes_the_agent_and_shows_its_state(
    server: tuple[httpx.Client, Path], graph_input: dict[str, Any]
) -> None:
    """A thread and run created over HTTP finish with the answer, messages, todos and tool results in state."""
    client, base_dir = server
    assistants = client.post("/assistants/search", json={"graph_id": "agentrt"}).json()
    assert assistants, "the agentrt graph is registered"
    thread_id = client.post("/threads", json={}).json()["thread_id"]
    run = client.post(f"/threads/{thread_id}/runs", json={"assistant_id": "agentrt", "input": graph_input}).json()
    assert _wait_run(client, thread_id, run["run_id"])["status"] == "success"

    state = client.get(f"/threads/{thread_id}/state").json()
    values = state["values"]
    assert state["next"] == []
    assert values["finish_reason"] == "completed"
    assert values["messages"][-1]["content"] == "The sum is 42; I wrote it to sum.txt."
    assert [m["type"] for m in values["messages"]].count("human") == 1
    assert [t["status"] for t in values["task_todo_list"]] == ["done", "done"]
    assert {e["tool_name"] for e in values["tool_result_store"]} >= {"calculator", "write_file"}
    assert any("42" in (e.get("preview") or "") for e in values["tool_result_store"])

    # Checkpoints went through our JSONL saver into base_dir, where the agentrt tools can read them.
    saver = JsonlCheckpointSaver(base_dir)
    tup = saver.get_tuple({"configurable": {"thread_id": thread_id, "tenant_id": "default"}})
    assert tup is not None and tup.checkpoint["channel_values"]["finish_reason"] == "completed"
    assert list((base_dir / "tenants" / "default" / "sessions" / thread_id).rglob("checkpoints.jsonl"))
    assert [p.read_text() for p in (base_dir / "tenants" / "default" / "sessions" / thread_id).rglob("sum.txt")] == [
        "42\n"
    ]


def test_the_demo_pauses_for_approval_in_the_server_and_finishes_when_resumed(
    demo_server: tuple[httpx.Client, Path],
) -> None:
    """The demo's unsafe publish step interrupts the run; a resume command with the decision completes it."""
    client, _ = demo_server
    thread_id = client.post("/threads", json={}).json()["thread_id"]
    run = client.post(
        f"/threads/{thread_id}/runs", json={"assistant_id": "agentrt", "input": {"user_input": "Summarise the sales"}}
    ).json()
    assert _wait_run(client, thread_id, run["run_id"])["status"] == "success"
    paused = client.get(f"/threads/{thread_id}/state").json()
    assert paused["next"] == ["acting"]
    requests = [i["value"] for task in paused["tasks"] for i in task.get("interrupts", [])]
    assert [r["name"] for r in requests] == ["publish_report"]

    run = client.post(
        f"/threads/{thread_id}/runs", json={"assistant_id": "agentrt", "command": {"resume": {"approved": True}}}
    ).json()
    assert _wait_run(client, thread_id, run["run_id"])["status"] == "success"
    done = client.get(f"/threads/{thread_id}/state").json()
    assert done["next"] == [] and done["values"]["finish_reason"] == "completed"
    assert "published" in done["values"]["messages"][-1]["content"]
    assert done["values"]["task_todo_list"] and all(t["status"] == "done" for t in done["values"]["task_todo_list"])
