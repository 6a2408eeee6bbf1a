"""`langgraph dev` (the Studio API server) runs the agent graph offline, on loopback, with our saver."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from checkpointing.saver import JsonlCheckpointSaver
from tests.support.runners import ROOT, make_config

pytestmark = [
    pytest.mark.integration,
    # Skipped only outside CI: there, `pip install -e '.[dev]'` must have brought the CLI.
    pytest.mark.skipif(
        shutil.which("langgraph") is None and os.environ.get("CI") != "true",
        reason="needs langgraph-cli[inmem]: pip install -e '.[dev]'",
    ),
]

START_BOUND_S = 90.0
RUN_BOUND_S = 60.0
# Everything the server or the CLI would otherwise send out (analytics, version checks, tracing).
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _studio_project(tmp_path: Path) -> Path:
    """The repo's langgraph.json with its relative paths anchored at the repo (the server runs in tmp)."""
    spec = json.loads((ROOT / "langgraph.json").read_text())

    def anchor(path: str) -> str:
        return str(ROOT / path[2:]) if path.startswith("./") else path

    spec["dependencies"] = [str(ROOT) if d == "." else d for d in spec.get("dependencies", [])]
    spec["graphs"] = {k: anchor(v) for k, v in spec["graphs"].items()}
    spec["checkpointer"]["path"] = anchor(spec["checkpointer"]["path"])
    project = tmp_path / "studio"
    project.mkdir()
    (project / "langgraph.json").write_text(json.dumps(spec))
    return project


@contextmanager
def _serve(tmp_path: Path, config: Path) -> Iterator[tuple[httpx.Client, Path]]:
    """A `langgraph dev` server on a free loopback port (stopped by its process group)."""
    project = _studio_project(tmp_path)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env.update(OFFLINE_ENV, AGENTRT_CONFIG=str(config), PYTHONPATH=str(ROOT))
    env.pop("AGENTRT_BASE_DIR", None)
    log_path = tmp_path / "server.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        ["langgraph", "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
        cwd=project,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0)
    try:
        deadline = time.monotonic() + START_BOUND_S
        while True:
            assert proc.poll() is None, "the server exited: " + log_path.read_text()[-3000:]
            try:
                if client.get("/ok").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start: " + log_path.read_text()[-3000:]
            time.sleep(0.5)
        yield client, tmp_path / "agentrt"
    finally:
        client.close()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        log.close()


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
