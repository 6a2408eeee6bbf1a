"""`agentrt serve` through the real `langgraph_sdk` clients (async and sync) and `RemoteGraph`.

A real uvicorn server in a subprocess on a free loopback port, the default demo config (the scripted
model plans, queries the datasets, writes report.md and asks before `publish_report`).
"""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError

from tests.support.runners import make_config
from tests.support.serve import Server, cli, serving, slow_config

ASK = {"messages": [{"role": "user", "content": "How did each region do against its target?"}]}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """One demo server for the tests of this file (each works on threads of its own)."""
    tmp_path = tmp_path_factory.mktemp("api")
    config = make_config(tmp_path)
    with serving(config, tmp_path) as server:
        yield server, config


async def test_async_client_streams_a_turn_answers_the_approval_and_reads_state_and_history(demo):
    server, _ = demo
    client = get_client(url=server.url)
    [assistant] = await client.assistants.search(graph_id="agentrt")
    assert (await client.assistants.get("agentrt"))["assistant_id"] == assistant["assistant_id"]
    graph = await client.assistants.get_graph("agentrt")
    assert {"init", "planning", "reasoning", "acting", "refining", "memory"} <= {n["id"] for n in graph["nodes"]}
    schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    assert "user_input" in json.dumps(schemas["input_schema"])

    thread = await client.threads.create(metadata={"project": "q3"})
    tid = thread["thread_id"]
    parts = [
        p
        async for p in client.runs.stream(
            tid, "agentrt", input=ASK, stream_mode=["values", "updates", "messages-tuple", "custom"]
        )
    ]
    assert parts[0].event == "metadata"
    run_id = parts[0].data["run_id"]
    kinds = {p.event for p in parts}
    assert {"values", "updates", "messages", "custom"} <= kinds
    tool_calls = [p.data["name"] for p in parts if p.event == "custom" and p.data.get("event") == "tool_call"]
    assert "query_dataset" in tool_calls and "write_file" in tool_calls
    asked = [p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in p.data]
    assert asked and asked[0][0]["value"]["name"] == "publish_report"
    assert parts[-1].event == "values" and parts[-1].data["__interrupt__"][0]["value"]["name"] == "publish_report"

    state = await client.threads.get_state(tid)
    assert state["next"] == ["acting"]
    assert state["interrupts"][0]["value"]["kind"] == "tool_approval"
    assert state["values"]["task_todo_list"][0]["status"] == "done"
    history = await client.threads.get_history(tid, limit=5)
    assert len(history) == 5
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert history[1]["checkpoint"]["checkpoint_id"] == state["parent_checkpoint"]["checkpoint_id"]
    assert (await client.threads.get(tid))["status"] == "interrupted"
    found = await client.threads.search(metadata={"project": "q3"})
    assert [t["thread_id"] for t in found] == [tid]

    result = await client.runs.wait(tid, "agentrt", command={"resume": {"approved": True}})
    assert result["finish_reason"] == "completed"
    assert "__interrupt__" not in result
    assert (await client.threads.get_state(tid))["next"] == []
    assert (await client.threads.get(tid))["status"] == "idle"
    # The answer is a run of its own, listed beside the run that asked (which succeeded: it stopped to ask).
    resumed, first = await client.runs.list(tid)
    assert first["run_id"] == run_id and resumed["run_id"] != run_id
    assert [first["status"], resumed["status"]] == ["success", "success"]
    assert (await client.runs.get(tid, run_id))["status"] == "success"

    # The session behind the thread is an agentrt session: the CLI shows the approval and the answer.
    shown = cli(_config(demo), server.log.parent, "show", tid, "--json", "--last", "200")
    assert shown.returncode == 0, shown.stderr
    types = [e["type"] for e in json.loads(shown.stdout)["entries"]]
    assert "hitl_request" in types and "hitl_decision" in types and types[-1] == "run_end"


def _config(demo: tuple[Server, Path]) -> Path:
    return demo[1]


def test_sync_client_background_run_join_reject_copy_and_delete(demo):
    server, _ = demo
    client = get_sync_client(url=server.url)
    thread = client.threads.create()
    tid = thread["thread_id"]
    run = client.runs.create(tid, "agentrt", input={"user_input": "report revenue by region"})
    assert run["status"] in ("running", "pending")
    joined = client.runs.join(tid, run["run_id"])
    assert joined["__interrupt__"][0]["value"]["name"] == "publish_report"
    # As in LangGraph's server: the run succeeded (it stopped to ask); the thread is interrupted.
    assert client.runs.get(tid, run["run_id"])["status"] == "success"
    assert client.threads.get(tid)["status"] == "interrupted"

    parts = list(
        client.runs.stream(
            tid, "agentrt", command={"resume": {"approved": False, "reason": "not yet"}}, stream_mode="updates"
        )
    )
    rejected = [p for p in parts if p.event == "updates" and "acting" in p.data]
    assert rejected and "not yet" in json.dumps(rejected[0].data)
    assert client.threads.get_state(tid)["values"]["finish_reason"] == "completed"

    copy = client.threads.copy(tid)
    assert copy["thread_id"] != tid
    assert client.threads.get_state(copy["thread_id"])["values"]["finish_reason"] == "completed"
    client.threads.delete(copy["thread_id"])
    with pytest.raises(NotFoundError):
        client.threads.get(copy["thread_id"])
    assert client.threads.get(tid)["thread_id"] == tid  # the original is untouched


def test_stateless_run_and_unknown_thread(demo):
    server, _ = demo
    client = get_sync_client(url=server.url)
    values = client.runs.wait(None, "agentrt", input={"user_input": "report"})
    assert values["__interrupt__"][0]["value"]["name"] == "publish_report"
    events = [p.data for p in client.runs.stream(None, "agentrt", input={"user_input": "r"}, stream_mode="events")]
    ended = [e["name"] for e in events if isinstance(e, dict) and e.get("event") == "on_chain_end"]
    assert ended[:3] == ["init", "planning", "reasoning"]
    assert any(e.get("event") == "on_custom_event" and e["name"] == "tool_call" for e in events if isinstance(e, dict))
    with pytest.raises(httpx.HTTPStatusError, match="404"):
        client.runs.wait(str(uuid.uuid4()), "agentrt", input={"user_input": "x"})
    with pytest.raises(NotFoundError):
        client.threads.get_state("no-such-thread")


def test_remote_graph_invoke_interrupt_resume_and_state(demo):
    server, _ = demo
    remote = RemoteGraph("agentrt", url=server.url)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    first = remote.invoke({"user_input": "report revenue by region"}, config)
    assert first["__interrupt__"][0]["value"]["name"] == "publish_report"
    snap = remote.get_state(config)
    assert snap.next == ("acting",)
    done = remote.invoke(Command(resume={"approved": True}), config)
    assert done["finish_reason"] == "completed"
    assert remote.get_state(config).next == ()
    assert len(list(remote.get_state_history(config, limit=3))) == 3
    assert "reasoning" in remote.get_graph().nodes


async def test_remote_graph_async_stream(demo):
    server, _ = demo
    remote = RemoteGraph("agentrt", url=server.url)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    nodes = [
        next(iter(chunk)) async for chunk in remote.astream({"user_input": "report"}, config, stream_mode="updates")
    ]
    assert nodes[:3] == ["init", "planning", "reasoning"]
    assert nodes[-1] == "__interrupt__"
    final = await remote.ainvoke(Command(resume=True), config)
    assert final["finish_reason"] == "completed"


def test_cancel_stops_the_run_and_a_run_without_input_continues_it(tmp_path):
    config = slow_config(tmp_path)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "agentrt", input={"user_input": "rest"})
        _wait_for_tool_result(client, tid)
        client.runs.cancel(tid, run["run_id"], wait=True)
        assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
        state = client.threads.get_state(tid)
        # Stopped mid-run: a node still to run, or one whose writes were saved before its checkpoint.
        assert state["next"] or state["tasks"], "a cancelled run keeps its last checkpoint"
        assert client.threads.get(tid)["status"] == "interrupted"
        with pytest.raises(Exception, match=r"409|unfinished"):
            client.runs.wait(tid, "agentrt", input={"user_input": "something else"})
        values = client.runs.wait(tid, "agentrt", input=None)
        assert values["finish_reason"] == "completed"
        answer = [m for m in values["messages"] if m["type"] == "ai"][-1]["content"]
        assert answer == "Rested four times."


def _wait_for_tool_result(client, tid: str, bound_s: float = 30.0) -> None:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        msgs = client.threads.get_state(tid)["values"].get("messages") or []
        if any(m["type"] == "tool" for m in msgs):
            return
        time.sleep(0.1)
    raise AssertionError("no tool result within the bound")


def test_cli_session_is_a_thread_and_an_api_thread_continues_in_the_cli(demo):
    server, config = demo
    cwd = server.log.parent
    made = cli(config, cwd, "run", "--json", "--approve-all", "report revenue")
    assert made.returncode == 0, made.stderr
    sid = json.loads(made.stdout)["session_id"]
    client = get_sync_client(url=server.url)
    assert sid in [t["thread_id"] for t in client.threads.search(limit=100)]
    assert client.threads.get_state(sid)["values"]["finish_reason"] == "completed"
    # The CLI's turn asked, and --approve-all answered: two runs, as two API calls would make them.
    assert [r["status"] for r in client.runs.list(sid)] == ["success", "success"]

    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "agentrt", input={"user_input": "report"})
    client.runs.wait(tid, "agentrt", command={"resume": {"approved": True}})
    again = cli(config, cwd, "run", "--json", "--approve-all", "--session", tid, "once more")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == "COMPLETED"
    assert len(client.runs.list(tid)) == 4  # the API's turn and answer, the CLI's turn and answer
    assert client.threads.get_state(tid)["values"]["user_input"] == "once more"
    assert client.threads.get(tid)["status"] == "idle"

    # The server's next turn continues after the CLI's (one branch, turns in order).
    client.runs.wait(tid, "agentrt", input={"user_input": "third"})
    client.runs.wait(tid, "agentrt", command={"resume": {"approved": True}})
    shown = json.loads(cli(config, cwd, "show", tid, "--json").stdout)
    users = [m["content"] for m in shown["session"]["messages"] if m["role"] == "user"]
    assert users == ["report", "once more", "third"]
    assert list(shown["branches"]) == ["main"]


def test_binding_beyond_loopback_without_auth_is_refused(tmp_path):
    config = make_config(tmp_path)
    out = cli(config, tmp_path, "serve", "--host", "0.0.0.0", "--port", "1")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "without authentication" in out.stderr and "api_keys" in out.stderr


def test_a_port_in_use_is_refused_in_one_line_and_nothing_is_made(tmp_path):
    config = make_config(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        out = cli(config, tmp_path, "serve", "--port", str(port))
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"agentrt serve: error: cannot listen on 127.0.0.1:{port}: address already in use; "
        "stop what holds it or choose another port with --port"
    )
    assert not (tmp_path / "agentrt").exists()  # no store opened


def test_forked_branch_state_and_history_follow_the_branch(demo):
    server, _ = demo
    client = get_sync_client(url=server.url)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "agentrt", input={"user_input": "report"})
    client.runs.wait(tid, "agentrt", command={"resume": {"approved": True}})
    old = [h["checkpoint"]["checkpoint_id"] for h in client.threads.get_history(tid, limit=100)]

    page = httpx.get(f"{server.url}/ui/sessions/{tid}").text
    entries = re.findall(r'class="entry tool_result" data-entry="([^"]+)"', page)
    fork_at = entries[2]
    forked = httpx.post(f"{server.url}/ui/sessions/{tid}/fork", data={"entry_id": fork_at}, follow_redirects=False)
    assert forked.status_code == 303 and "error" not in forked.headers["location"]

    state = client.threads.get_state(tid)
    cp = state["checkpoint"]["checkpoint_id"]
    assert cp in old and cp != old[0], "the state is the fork point, an ancestor of the old head"
    # The history lists every branch of the thread, as LangGraph's server lists its checkpoints.
    assert [h["checkpoint"]["checkpoint_id"] for h in client.threads.get_history(tid, limit=100)] == old
    assert client.threads.get(tid)["branch_id"] != "main"

    client.runs.wait(tid, "agentrt", input={"user_input": "again, on the branch"})
    new = client.threads.get_history(tid, limit=200)
    ids = [h["checkpoint"]["checkpoint_id"] for h in new]
    assert ids[0] == client.threads.get_state(tid)["checkpoint"]["checkpoint_id"]
    assert set(old) <= set(ids), "the old branch stays listed"
    parents = {h["checkpoint"]["checkpoint_id"]: (h["parent_checkpoint"] or {}).get("checkpoint_id") for h in new}
    chain, at = [], ids[0]
    while at:
        chain.append(at)
        at = parents.get(at)
    assert cp in chain and old[0] not in chain, "the new branch goes on from the fork point, not the old head"


def test_page_buttons_pause_end_and_send_the_next_turn(demo):
    server, _ = demo
    client = get_sync_client(url=server.url)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "agentrt", input={"user_input": "report"})
    page = f"{server.url}/ui/sessions/{tid}"
    rejected = httpx.post(f"{page}/decision", data={"approved": "0"}, follow_redirects=True)
    assert rejected.status_code == 200 and "Approval needed" not in rejected.text
    client.runs.join(tid, client.runs.list(tid)[0]["run_id"])
    assert client.threads.get_state(tid)["values"]["finish_reason"] == "completed"

    sent = httpx.post(f"{page}/turn", data={"text": "and now the costs"}, follow_redirects=False)
    assert sent.status_code == 303 and "error" not in sent.headers["location"]
    client.runs.join(tid, client.runs.list(tid)[0]["run_id"])
    assert client.threads.get_state(tid)["values"]["user_input"] == "and now the costs"

    httpx.post(f"{page}/resume", data={"approved": "1"})  # nothing to continue: an error shown, no change
    httpx.post(f"{page}/decision", data={"approved": "1"})
    client.runs.join(tid, client.runs.list(tid)[0]["run_id"])
    paused = httpx.post(f"{page}/pause", follow_redirects=False)
    assert paused.status_code == 303 and "error" not in paused.headers["location"]
    assert client.threads.get(tid)["session_status"] == "PAUSED"
    with pytest.raises(httpx.HTTPStatusError, match="409"):
        client.runs.wait(tid, "agentrt", input={"user_input": "refused while paused"})
    ended = httpx.post(f"{page}/end", follow_redirects=False)
    assert "error" not in ended.headers["location"]
    assert client.threads.get(tid)["session_status"] == "ENDED"
    assert "ENDED" in httpx.get(page).text
