"""The thread streams of the newest `langgraph_sdk` against `agentrt serve`: `threads.stream` (the
thread-stream protocol, over server-sent events and over a WebSocket), `threads.join_stream` in its
modes, and the `since` / `Last-Event-ID` resume positions; each refused request answers a 4xx
naming the field and creates nothing; another tenant gets 404."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import APIStatusError, NotFoundError
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.support.runners import make_config
from tests.support.serve import Server, serving

ASK = {"messages": [{"role": "user", "content": "How did each region do against its target?"}]}
ALICE, GLOBEX = "alice-key-0123456789", "globex-key-0123456789"
KEYS = [{"key": ALICE, "tenant_id": "acme", "user_id": "alice"}, {"key": GLOBEX, "tenant_id": "globex"}]
BOUND_S = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("thread-stream")
    with serving(make_config(tmp, serve={"api_keys": KEYS}), tmp) as running:
        yield running


def _client(server: Server, key: str = ALICE) -> SyncLangGraphClient:
    return get_sync_client(url=server.url, api_key=key)


def _until(ready: Callable[[], bool], what: str) -> None:
    """Wait for what the server already sent to reach the SDK's own reader thread."""
    deadline = time.monotonic() + BOUND_S
    while not ready():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def _sse(lines: Iterator[str]) -> Iterator[tuple[str | None, str, Any]]:
    """(id, event, data) of a server-sent event stream."""
    eid, name, data = None, "message", []
    for line in lines:
        if not line:
            if data:
                yield eid, name, json.loads("\n".join(data))
            eid, name, data = None, "message", []
        elif line.startswith("id:"):
            eid = line[3:].strip()
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def _headers(key: str = ALICE) -> dict[str, str]:
    return {"x-api-key": key}


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_threads_stream_starts_a_run_on_a_new_thread_answers_its_approval_and_gives_the_output(
    server: Server, transport: str
) -> None:
    client = _client(server)
    # The SDK's WebSocket does not send the client's key: the stream's own headers carry it.
    stream = client.threads.stream(assistant_id="agentrt", transport=transport, headers=_headers())  # type: ignore[arg-type]
    with stream as thread:
        started = thread.run.start(input=ASK, metadata={"via": "thread stream"})
        _until(lambda: thread.interrupted, "the approval reached the client")
        [asked] = thread.interrupts
        assert asked["value"]["name"] == "publish_report" and asked["namespace"] == []
        answered = thread.run.respond({"approved": True})
        output = thread.output
    assert "publish_report" in json.dumps(output["messages"][-3:]) and output["task_todo_list"]
    runs = client.runs.list(thread.thread_id)
    assert [r["run_id"] for r in runs] == [answered["run_id"], started["run_id"]]
    assert [r["status"] for r in runs] == ["success", "success"]
    made = client.threads.get(thread.thread_id)  # the thread was made by run.start, with its metadata
    assert made["metadata"]["via"] == "thread stream" and made["status"] == "idle"
    assert client.threads.get_state(thread.thread_id)["values"]["messages"] == output["messages"]


def test_threads_stream_on_a_named_thread_streams_messages_and_values(server: Server) -> None:
    client = _client(server)
    tid = str(uuid.uuid4())
    with client.threads.stream(tid, assistant_id="agentrt") as thread:
        thread.run.start(input=ASK)
        _until(lambda: thread.interrupted, "the approval reached the client")
        events = []
        for event in thread.events:  # replayed from the run's start
            events.append(event)
            if event["method"] == "input.requested":
                break
    methods = [e["method"] for e in events]
    assert methods[0] == "lifecycle" and events[0]["params"]["data"]["event"] == "running"
    assert {"values", "updates", "messages", "custom", "tasks", "checkpoints"} <= set(methods)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    texts: dict[str, str] = {}
    for e in events:
        data = e["params"]["data"]
        if e["method"] == "messages" and data["event"] == "content-block-delta":
            texts[data["message_id"]] = texts.get(data["message_id"], "") + data["delta"]["text"]
        if e["method"] == "messages" and data["event"] == "content-block-finish" and data["index"] == 0:
            assert data["content"]["text"] == texts.get(data["message_id"], "")
    assert any(texts.values()), "the model's text streamed as deltas"
    assert client.threads.get(tid)["status"] == "interrupted"


def test_the_event_stream_resumes_after_since_and_filters_channels(server: Server) -> None:
    client = _client(server)
    tid = str(uuid.uuid4())
    command = {"id": 1, "method": "run.start", "params": {"assistant_id": "agentrt", "input": ASK}}
    answer = httpx.post(f"{server.url}/threads/{tid}/commands", json=command, headers=_headers()).json()
    assert answer["type"] == "success" and answer["id"] == 1 and answer["result"]["run_id"]
    client.runs.join(tid, answer["result"]["run_id"])

    def read(body: dict[str, Any]) -> list[tuple[str | None, str, Any]]:
        url = f"{server.url}/threads/{tid}/stream/events"
        out = []
        with httpx.stream("POST", url, json=body, headers=_headers(), timeout=BOUND_S) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for eid, name, event in _sse(response.iter_lines()):
                event["params"].pop("timestamp")  # when it was sent
                part = (eid, name, event)
                out.append(part)
                if part[1] == "lifecycle" and part[2]["params"]["data"]["event"] != "running":
                    return out
        raise AssertionError("the stream ended before the run's end")

    whole = read({"channels": ["lifecycle", "input", "values"]})
    assert {name for _, name, _ in whole} == {"lifecycle", "input.requested", "values"}
    assert whole[-1][2]["params"]["data"]["event"] == "interrupted"
    assert [eid for eid, _, _ in whole] == [str(e["seq"]) for _, _, e in whole]
    since = whole[2][2]["seq"]
    assert read({"channels": ["lifecycle", "input", "values"], "since": since}) == whole[3:]
    assert {n for _, n, _ in read({"channels": ["lifecycle"]})} == {"lifecycle"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "id"),
        ({"id": "one", "method": "run.start"}, "id"),
        ({"id": 1, "method": "run.start", "params": {}}, "params.assistant_id"),
        ({"id": 1, "method": "run.start", "params": {"assistant_id": "agentrt", "input": {"x": 1}}}, "run input"),
        ({"id": 1, "method": "run.start", "params": {"assistant_id": "nobody", "input": ASK}}, "assistant"),
        ({"id": 1, "method": "run.start", "params": {"assistant_id": "agentrt"}}, "params.input"),
        ({"id": 1, "method": "state.rewind", "params": {}}, "method"),
        ({"id": 1, "method": "state.fork", "params": {}}, "params.checkpoint_id"),
        ({"id": 1, "method": "input.respond", "params": {"response": True}}, "interrupt_id"),
    ],
)
def test_a_refused_command_answers_4xx_naming_the_field_and_makes_no_thread(
    server: Server, body: dict[str, Any], field: str
) -> None:
    tid = str(uuid.uuid4())
    refused = httpx.post(f"{server.url}/threads/{tid}/commands", json=body, headers=_headers())
    assert 400 <= refused.status_code < 500 and field in refused.text, refused.text
    with pytest.raises(NotFoundError):
        _client(server).threads.get(tid)


def test_event_streams_refuse_bad_channels_unknown_threads_and_other_tenants(server: Server) -> None:
    acme = _client(server)
    tid = acme.threads.create()["thread_id"]
    url = f"{server.url}/threads/{tid}/stream/events"
    for body, field in (({"channels": []}, "channels"), ({"channels": ["bogus"]}, "channels"), ({}, "channels")):
        refused = httpx.post(url, json=body, headers=_headers())
        assert refused.status_code == 422 and field in refused.text
    other = httpx.post(url, json={"channels": ["values"]}, headers=_headers(GLOBEX))
    assert other.status_code == 404
    state = {"id": 3, "method": "state.get", "params": {}}
    assert httpx.post(f"{server.url}/threads/{tid}/commands", json=state, headers=_headers(GLOBEX)).status_code == 404
    mine = httpx.post(f"{server.url}/threads/{tid}/commands", json=state, headers=_headers()).json()
    assert mine == {"type": "success", "id": 3, "result": {"values": {}, "checkpoint": mine["result"]["checkpoint"]}}
    unknown = f"{server.url}/threads/{uuid.uuid4()}/stream/events"
    assert httpx.post(unknown, json={"channels": ["values"]}, headers=_headers()).status_code == 404


def _until_done(parts: Iterator[Any]) -> list[Any]:
    out = []
    for part in parts:
        out.append(part)
        if part.event == "metadata" and part.data.get("status") == "run_done":
            return out
    raise AssertionError("the thread stream ended")


def test_join_stream_replays_after_last_event_id_and_follows_live_runs_by_mode(server: Server) -> None:
    acme, globex = _client(server), _client(server, GLOBEX)
    tid = acme.threads.create()["thread_id"]
    acme.runs.wait(tid, "agentrt", input=ASK)
    [run] = acme.runs.list(tid)
    rid = run["run_id"]

    replayed = _until_done(acme.threads.join_stream(tid, last_event_id=f"{rid}:0"))
    of_run = list(acme.runs.join_stream(tid, rid))
    assert [(p.event, p.data) for p in replayed[:-1]] == [(p.event, p.data) for p in of_run]
    assert [p.id for p in replayed] == [f"{rid}:{n}" for n in range(1, len(replayed) + 1)]
    assert replayed[-1].data == {"status": "run_done", "run_id": rid}
    later = _until_done(acme.threads.join_stream(tid, last_event_id=replayed[-3].id))
    assert [(p.id, p.data) for p in later] == [(p.id, p.data) for p in replayed[-2:]]
    lifecycle = _until_done(acme.threads.join_stream(tid, stream_mode="lifecycle", last_event_id=f"{rid}:0"))
    assert [p.data for p in lifecycle] == [{"run_id": rid, "thread_id": tid, "attempt": 1}, replayed[-1].data]

    # Live: the stream is open before the answer's run starts, and follows it to its end.
    url = f"{server.url}/threads/{tid}/stream?stream_mode=lifecycle&stream_mode=state_update"
    with httpx.stream("GET", url, headers=_headers(), timeout=BOUND_S) as live:
        answer = acme.runs.create(tid, "agentrt", command={"resume": {"approved": True}})
        acme.runs.join(tid, answer["run_id"])
        acme.threads.update_state(tid, {"messages": [{"type": "human", "content": "a note"}]})
        parts = []
        for part in _sse(live.iter_lines()):
            parts.append(part)
            if part[1] == "state_update":
                break
    assert [(n, d.get("run_id")) for _, n, d in parts[:2]] == [("metadata", answer["run_id"])] * 2
    assert parts[1][2] == {"status": "run_done", "run_id": answer["run_id"]}
    assert parts[2][2]["state"]["values"]["messages"][-1]["content"] == "a note"

    with pytest.raises(APIStatusError) as bad:
        next(iter(acme.threads.join_stream(tid, stream_mode="bogus")))  # type: ignore[arg-type]
    assert bad.value.response.status_code == 422 and "stream_mode" in bad.value.response.text
    with pytest.raises(NotFoundError):
        next(iter(globex.threads.join_stream(tid)))


def test_a_thread_stream_on_a_thread_whose_last_run_is_over_gives_the_next_runs_output(server: Server) -> None:
    """The end of a run already over is not taken for the end of the run the stream starts."""
    client = _client(server)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "agentrt", input=ASK)
    client.runs.wait(tid, "agentrt", command={"resume": {"approved": True}})
    for turn in ("thanks", "and once more"):
        before = client.threads.get_state(tid)["values"]["messages"]
        with client.threads.stream(tid, assistant_id="agentrt") as thread:
            started = thread.run.start(input={"messages": [{"role": "user", "content": turn}]})
            _until(lambda: thread.interrupted, "the turn's approval reached the client")  # not the last run's end
            answered = thread.run.respond({"approved": True})
            output = thread.output
        assert client.runs.get(tid, answered["run_id"])["status"] == "success"
        assert client.runs.get(tid, started["run_id"])["status"] == "success"
        assert len(output["messages"]) > len(before) and turn in json.dumps(output["messages"])
        assert output["messages"] == client.threads.get_state(tid)["values"]["messages"]


def test_the_websocket_answers_commands_and_closes_on_callers_it_refuses(server: Server) -> None:
    tid = _client(server).threads.create()["thread_id"]
    base = server.url.replace("http://", "ws://")
    for path, headers, code in (
        (f"/threads/{tid}/stream/events", {}, 4401),
        (f"/threads/{uuid.uuid4()}/stream/events", _headers(), 4404),
        (f"/threads/{tid}/stream/events", _headers(GLOBEX), 4404),
    ):
        with connect(base + path, additional_headers=headers) as ws, pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=BOUND_S)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == code
    with connect(f"{base}/threads/{tid}/stream/events", additional_headers=_headers()) as ws:
        ws.send(json.dumps({"id": 1, "method": "state.get", "params": {}}))
        assert json.loads(ws.recv(timeout=BOUND_S))["result"]["values"] == {}
        ws.send(json.dumps({"id": 2, "method": "subscription.subscribe", "params": {"channels": ["bogus"]}}))
        refused = json.loads(ws.recv(timeout=BOUND_S))
        assert refused["type"] == "error" and refused["id"] == 2 and "channels" in refused["message"]
        ws.send(json.dumps({"method": "run.start"}))
        assert "id" in json.loads(ws.recv(timeout=BOUND_S))["message"]
