"""The thread-stream protocol's commands beyond starting and answering runs, sent by `langgraph_sdk`'s
thread stream (over server-sent events and over a WebSocket) to a real `agentrt serve`:
`state.listCheckpoints` (the branch's checkpoints, paged), `state.fork` (a new branch at a
checkpoint, made current, the branch it came from byte for byte as it was; also `run.start` with a
checkpoint in its config), `input.inject` (a user message as the next turn), `agent.getTree`, and
`subscription.reconnect` on the WebSocket (the events after `since`, under the id kept). Refused
commands name the field or answer 404, and change nothing."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from websockets.sync.client import ClientConnection, connect

from tests.support.runners import make_config
from tests.support.serve import Server, answering_config, serving

A = "agentrt"
ACME, GLOBEX = "acme-key-0123456789ab", "globex-key-0123456789"
KEYS = [{"key": ACME, "tenant_id": "acme"}, {"key": GLOBEX, "tenant_id": "globex"}]
BOUND_S = 60.0
TRANSPORTS = ["sse", "websocket"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("protocol-commands")
    config = answering_config(tmp, serve={"api_keys": KEYS})
    with serving(config, tmp) as srv:
        yield srv


@pytest.fixture
def acme(server: Server) -> SyncLangGraphClient:
    return get_sync_client(url=server.url, api_key=ACME)


def _headers(key: str = ACME) -> dict[str, str]:
    return {"x-api-key": key} if key else {}


def _thread(client: SyncLangGraphClient, *turns: str) -> str:
    tid = client.threads.create()["thread_id"]
    for text in turns:
        client.runs.wait(tid, A, input={"user_input": text})
    return str(tid)


def _texts(state: dict[str, Any]) -> list[str]:
    return [m["content"] for m in state["values"].get("messages") or []]


def _events(server: Server, tid: str) -> bytes:
    found = list(server.log.parent.rglob(f"{tid}/events.jsonl"))  # the server runs in its base folder
    assert len(found) == 1, found
    return found[0].read_bytes()


def _checkpoint_files(server: Server, tid: str) -> dict[str, bytes]:
    """Every run's checkpoint stream of the thread, by path."""
    return {str(p): p.read_bytes() for p in server.log.parent.rglob(f"{tid}/runs/*/checkpoints.jsonl")}


def _command(server: Server, tid: str, method: str, params: dict[str, Any], key: str = ACME) -> httpx.Response:
    body = {"id": 1, "method": method, "params": params}
    return httpx.post(f"{server.url}/threads/{tid}/commands", json=body, headers=_headers(key), timeout=BOUND_S)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_list_checkpoints_gives_the_branch_newest_first_and_pages_with_before(
    acme: SyncLangGraphClient, transport: str
) -> None:
    tid = _thread(acme, "one", "two")
    history = acme.threads.get_history(tid, limit=100)
    with acme.threads.stream(tid, assistant_id=A, transport=transport, headers=_headers()) as thread:  # type: ignore[arg-type]
        listed = thread._send_command("state.listCheckpoints", {"limit": 100})["checkpoints"]
        some = thread._send_command("state.get", {"namespace": [], "keys": ["messages", "nothing"]})
        page = thread._send_command("state.listCheckpoints", {"limit": 2, "before": listed[1]["id"]})["checkpoints"]
        first = thread._send_command("state.listCheckpoints", {})["checkpoints"]
    assert some["values"] == {"messages": history[0]["values"]["messages"]}
    assert some["checkpoint"]["checkpoint_id"] == history[0]["checkpoint"]["checkpoint_id"]
    assert [c["id"] for c in listed] == [h["checkpoint"]["checkpoint_id"] for h in history]
    assert [c["step"] for c in listed] == [h["metadata"]["step"] for h in history]
    assert [c["timestamp"] for c in listed] == [h["created_at"] for h in history]
    assert [c["metadata"]["source"] for c in listed] == [h["metadata"]["source"] for h in history]
    assert page == listed[2:4] and first == listed[:10]
    # A loop checkpoint names the node that wrote it: the one its parent had next.
    for checkpoint, parent in itertools.pairwise(history):
        named = next(c for c in listed if c["id"] == checkpoint["checkpoint"]["checkpoint_id"])
        if checkpoint["metadata"]["source"] == "loop" and len(parent["next"]) == 1:
            assert named["node_name"] == parent["next"][0]
    assert any(c.get("node_name") == "reasoning" for c in listed)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_state_fork_makes_a_new_current_branch_and_leaves_the_original_byte_for_byte(
    acme: SyncLangGraphClient, server: Server, transport: str
) -> None:
    tid = _thread(acme, "one", "two")
    history = acme.threads.get_history(tid, limit=100)
    before_events, before_files = _events(server, tid), _checkpoint_files(server, tid)
    branch = acme.threads.get(tid)["branch_id"]
    # The state at the end of the first turn (nothing next, "two" not asked yet).
    earlier = next(h for h in history if not h["next"] and _texts(h) and "two" not in _texts(h))
    cp = earlier["checkpoint"]["checkpoint_id"]

    with acme.threads.stream(tid, assistant_id=A, transport=transport, headers=_headers()) as thread:  # type: ignore[arg-type]
        forked = thread._send_command("state.fork", {"checkpoint_id": cp, "input": {"user_input": "three"}})
    assert forked["thread_id"] == tid
    assert acme.runs.join(tid, forked["run_id"])["messages"][-1]["content"] == "Done."

    state = acme.threads.get_state(tid)
    assert _texts(state)[: len(_texts(earlier)) + 1] == [*_texts(earlier), "three"]
    assert "two" not in _texts(state)
    assert acme.threads.get(tid)["branch_id"] != branch
    # The branch forked away from: entries and checkpoints are what they were, each state reads the same.
    assert _events(server, tid).startswith(before_events)
    after_files = _checkpoint_files(server, tid)
    assert {path: after_files[path] for path in before_files} == before_files
    for old in history:
        again = acme.threads.get_state(tid, checkpoint_id=old["checkpoint"]["checkpoint_id"])
        assert again["values"] == old["values"] and again["next"] == old["next"]


def test_run_start_with_a_checkpoint_in_its_config_forks_there(acme: SyncLangGraphClient) -> None:
    tid = _thread(acme, "one", "two")
    earlier = next(h for h in acme.threads.get_history(tid, limit=100) if not h["next"] and "two" not in _texts(h))
    branch = acme.threads.get(tid)["branch_id"]
    with acme.threads.stream(tid, assistant_id=A, headers=_headers()) as thread:
        config = {"configurable": {"checkpoint_id": earlier["checkpoint"]["checkpoint_id"]}}
        started = thread.run.start(input={"user_input": "four"}, config=config)
        output = thread.output
    assert acme.runs.get(tid, started["run_id"])["status"] == "success"
    assert _texts({"values": output})[: len(_texts(earlier)) + 1] == [*_texts(earlier), "four"]
    assert "two" not in _texts({"values": output}) and acme.threads.get(tid)["branch_id"] != branch


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_input_inject_runs_the_message_as_the_next_turn(acme: SyncLangGraphClient, transport: str) -> None:
    tid = _thread(acme, "one")
    first = acme.runs.create(tid, A, input={"user_input": "two"})  # in flight, or already over
    with acme.threads.stream(tid, assistant_id=A, transport=transport, headers=_headers()) as thread:  # type: ignore[arg-type]
        injected = thread._send_command(
            "input.inject", {"namespace": [], "message": {"role": "user", "content": "and a third thing"}}
        )
    acme.runs.join(tid, injected["run_id"])
    runs = acme.runs.list(tid)
    assert [r["run_id"] for r in runs[:2]] == [injected["run_id"], first["run_id"]]
    assert [r["status"] for r in runs] == ["success"] * len(runs)
    texts = _texts(acme.threads.get_state(tid))
    assert texts.index("two") < texts.index("and a third thing") < len(texts) - 1
    assert texts[-1] == "Done."


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_agent_get_tree_gives_the_root_with_its_runs_status(acme: SyncLangGraphClient, transport: str) -> None:
    fresh = acme.threads.create()["thread_id"]
    tid = _thread(acme, "one")
    [run] = acme.runs.list(tid)
    root = {"namespace": [], "graph_name": A}
    with acme.threads.stream(fresh, assistant_id=A, transport=transport, headers=_headers()) as thread:  # type: ignore[arg-type]
        assert thread._send_command("agent.getTree", {}) == {"tree": {**root, "status": "started"}}
    with acme.threads.stream(tid, assistant_id=A, transport=transport, headers=_headers()) as thread:  # type: ignore[arg-type]
        assert thread._send_command("agent.getTree", {}) == {"tree": {**root, "status": "completed"}}
        by_run = thread._send_command("agent.getTree", {"run_id": run["run_id"]})
    assert by_run == {"tree": {**root, "status": "completed"}}


def test_a_thread_waiting_for_an_approval_is_interrupted_in_the_tree_and_refuses_inject_and_fork(
    tmp_path: Path,
) -> None:
    with serving(make_config(tmp_path), tmp_path) as srv:  # the demo asks to publish its report
        client = get_sync_client(url=srv.url)
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, A, input={"user_input": "report revenue by region"})
        answer = _command(srv, tid, "agent.getTree", {}, key="")
        assert answer.json()["result"]["tree"]["status"] == "interrupted"
        cp = client.threads.get_state(tid)["checkpoint"]["checkpoint_id"]
        inject = {"namespace": [], "message": {"role": "user", "content": "and also"}}
        fork = {"checkpoint_id": cp, "input": {"user_input": "again"}}
        for method, params in (("input.inject", inject), ("state.fork", fork)):
            refused = _command(srv, tid, method, params, key="")
            assert refused.status_code == 409, (method, refused.text)
            assert "input.respond" in refused.text or method == "state.fork", refused.text
        thread = client.threads.get(tid)
        assert (thread["status"], thread["branch_id"], len(client.runs.list(tid))) == ("interrupted", "main", 1)


@pytest.mark.parametrize(
    ("method", "params", "status", "field"),
    [
        ("input.inject", {"namespace": ["sub"], "message": {"role": "user", "content": "x"}}, 422, "params.namespace"),
        ("input.inject", {"namespace": [], "message": {"role": "system", "content": "x"}}, 422, "params.message.role"),
        ("input.inject", {"namespace": [], "message": {"role": "robot", "content": "x"}}, 422, "params.message.role"),
        ("input.inject", {"message": {"role": "user", "content": "x"}}, 422, "params.namespace"),
        ("state.fork", {}, 422, "params.checkpoint_id"),
        ("state.fork", {"checkpoint_id": str(uuid.uuid4()), "input": {"user_input": "x"}}, 404, "checkpoint"),
        ("state.listCheckpoints", {"limit": 0}, 422, "params.limit"),
        ("state.listCheckpoints", {"before": str(uuid.uuid4())}, 404, "checkpoint"),
        ("state.listCheckpoints", {"before": "../not an id"}, 404, "checkpoint"),
        ("state.fork", {"checkpoint_id": "../not an id", "input": {"user_input": "x"}}, 404, "checkpoint"),
        ("state.fork", {"checkpoint_id": "HEAD", "input": {"x": 1}}, 422, "run input"),
        (
            "state.fork",
            {"checkpoint_id": "HEAD", "input": {"user_input": "x"}, "assistant_id": str(uuid.uuid4())},
            404,
            "assistant",
        ),
        ("agent.getTree", {"run_id": "../not an id"}, 404, "run"),
        ("state.listCheckpoints", {"namespace": ["sub"]}, 422, "params.namespace"),
        ("state.get", {"namespace": ["sub"]}, 422, "params.namespace"),
        ("state.get", {"keys": "messages"}, 422, "params.keys"),
        ("agent.getTree", {"run_id": "r-000000000000"}, 404, "run"),
        ("subscription.reconnect", {"channels": ["values"], "since": 0}, 422, "WebSocket"),
        ("state.rewind", {}, 422, "method"),
    ],
)
def test_a_refused_command_names_what_is_wrong_and_changes_nothing(
    acme: SyncLangGraphClient, server: Server, method: str, params: dict[str, Any], status: int, field: str
) -> None:
    tid = _thread(acme, "one")
    before, runs = acme.threads.get(tid), acme.runs.list(tid)
    if params.get("checkpoint_id") == "HEAD":
        params = {**params, "checkpoint_id": acme.threads.get_state(tid)["checkpoint"]["checkpoint_id"]}
    refused = _command(server, tid, method, params)
    assert refused.status_code == status and field in refused.text, refused.text
    after = acme.threads.get(tid)
    assert (after["branch_id"], after["values"], acme.runs.list(tid)) == (before["branch_id"], before["values"], runs)


def test_another_tenant_gets_404_for_every_command(acme: SyncLangGraphClient, server: Server) -> None:
    tid = _thread(acme, "private")
    cp = acme.threads.get_state(tid)["checkpoint"]["checkpoint_id"]
    for method, params in (
        ("state.listCheckpoints", {}),
        ("state.fork", {"checkpoint_id": cp, "input": {"user_input": "x"}}),
        ("input.inject", {"namespace": [], "message": {"role": "user", "content": "x"}}),
        ("agent.getTree", {}),
    ):
        assert _command(server, tid, method, params, key=GLOBEX).status_code == 404, method
    assert len(acme.runs.list(tid)) == 1 and acme.threads.get_state(tid)["checkpoint"]["checkpoint_id"] == cp


def _frames(ws: ClientConnection, until_id: int | None = None, count: int = 0) -> tuple[dict[str, Any], list[Any]]:
    """The answer to command `until_id` and the events read with it, then `count` more events."""
    answer: dict[str, Any] = {}
    events: list[Any] = []
    while (until_id is not None and not answer) or len(events) < count:
        frame = json.loads(ws.recv(timeout=BOUND_S))
        if frame.get("type") == "event":
            events.append(frame)
        elif frame.get("id") == until_id:
            answer = frame
    return answer, events


def _terminal(event: dict[str, Any]) -> bool:
    return event["method"] == "lifecycle" and event["params"]["data"]["event"] != "running"


def test_subscription_reconnect_sends_the_events_after_since_under_the_id_kept(
    acme: SyncLangGraphClient, server: Server
) -> None:
    tid = _thread(acme, "one", "two")
    url = f"{server.url.replace('http://', 'ws://')}/threads/{tid}/stream/events"
    channels = ["lifecycle", "values"]
    with connect(url, additional_headers=_headers()) as ws:
        ws.send(json.dumps({"id": 1, "method": "subscription.subscribe", "params": {"channels": channels}}))
        answer, events = _frames(ws, until_id=1)
        total = answer["result"]["replayed_events"]
        _, more = _frames(ws, count=max(0, total - len(events)))
        whole = events + more
    assert len(whole) == total and sum(map(_terminal, whole)) == 2  # both runs, from their start
    since = whole[3]["seq"]
    with connect(url, additional_headers=_headers()) as ws:
        params = {"channels": channels, "since": since, "subscription_id": "kept"}
        ws.send(json.dumps({"id": 7, "method": "subscription.reconnect", "params": params}))
        answer, events = _frames(ws, until_id=7)
        _, more = _frames(ws, count=max(0, total - 4 - len(events)))
        ws.send(json.dumps({"id": 8, "method": "subscription.unsubscribe", "params": {"subscription_id": "kept"}}))
        unsubscribed, _ = _frames(ws, until_id=8)
        ws.send(json.dumps({"id": 9, "method": "subscription.reconnect", "params": {"channels": channels}}))
        no_since, _ = _frames(ws, until_id=9)
    assert answer == {"type": "success", "id": 7, "result": {"subscription_id": "kept", "replayed_events": total - 4}}

    def strip(event: dict[str, Any]) -> dict[str, Any]:
        return {**event, "params": {k: v for k, v in event["params"].items() if k != "timestamp"}}

    assert [strip(e) for e in events + more] == [strip(e) for e in whole[4:]]
    assert unsubscribed["type"] == "success"
    assert no_since["type"] == "error" and no_since["error"] == "invalid_argument" and "since" in no_since["message"]
