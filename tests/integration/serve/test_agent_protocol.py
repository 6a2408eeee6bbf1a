"""The open Agent Protocol under `/ap`: every operation of its OpenAPI document answered, on both
stores, with a second tenant that finds none of the first's runs.

`OPERATIONS` lists the protocol's operations (langchain-ai/agent-protocol, `openapi.json`). With
that document at hand (`AGENTRT_AGENT_PROTOCOL_SPEC=/path/to/openapi.json`), the spec test also
checks that the list is the document's and that every answer validates against the document's
response schema; without it that test is skipped with the reason (nothing is downloaded).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.support.serve import serving
from tests.support.store_configs import StoreSetup

ACME, GLOBEX = "acme-key-0123456789ab", "globex-key-0123456789"
KEYS = [{"key": ACME, "tenant_id": "acme", "user_id": "alice"}, {"key": GLOBEX, "tenant_id": "globex"}]
OPERATIONS = {
    ("post", "/agents/search"),
    ("get", "/agents/{agent_id}"),
    ("get", "/agents/{agent_id}/schemas"),
    ("post", "/threads"),
    ("post", "/threads/search"),
    ("get", "/threads/{thread_id}/history"),
    ("post", "/threads/{thread_id}/copy"),
    ("get", "/threads/{thread_id}"),
    ("delete", "/threads/{thread_id}"),
    ("patch", "/threads/{thread_id}"),
    ("post", "/runs/search"),
    ("get", "/runs/{run_id}"),
    ("delete", "/runs/{run_id}"),
    ("get", "/runs/{run_id}/wait"),
    ("get", "/runs/{run_id}/stream"),
    ("post", "/runs/{run_id}/cancel"),
    ("post", "/runs"),
    ("post", "/runs/stream"),
    ("post", "/runs/wait"),
    ("put", "/store/items"),
    ("delete", "/store/items"),
    ("get", "/store/items"),
    ("post", "/store/items/search"),
    ("post", "/store/namespaces"),
    ("post", "/threads/{thread_id}/stream"),
    ("get", "/threads/{thread_id}/stream"),
    ("post", "/threads/{thread_id}/commands"),
}
"""The protocol's operations (the WebSocket of `GET /threads/{id}/stream` answered as one)."""
PLAN = {"content": json.dumps({"plan": "Read the figures, then answer.", "todos": ["Answer"]})}
SCRIPT = [PLAN, {"content": "Sales grew 12% this quarter."}] * 3
"""Three turns (a run on the thread, a stateless run, a streamed run), each a plan and an answer."""
QUESTION = {"messages": [{"role": "user", "content": "Summarise the sales"}]}


def _exchange(http: httpx.Client, sockets: list[Any]) -> list[tuple[str, str, httpx.Response]]:
    """One call of every operation, in an order where each has what it needs; (method, template, answer).
    The first line of the thread's event stream and the WebSocket's answer go to `sockets`."""
    out: list[tuple[str, str, httpx.Response]] = []

    def call(method: str, template: str, path: str, **kw: Any) -> httpx.Response:
        r = http.request(method.upper(), "/ap" + path, **kw)
        out.append((method, template, r))
        return r

    agents = call("post", "/agents/search", "/agents/search", json={}).json()
    aid = agents[0]["agent_id"]
    call("get", "/agents/{agent_id}", f"/agents/{aid}")
    call("get", "/agents/{agent_id}/schemas", f"/agents/{aid}/schemas")
    tid = call("post", "/threads", "/threads", json={"metadata": {"project": "sales"}}).json()["thread_id"]
    done = call("post", "/runs/wait", "/runs/wait", json={"thread_id": tid, "agent_id": aid, **QUESTION}).json()
    rid = done["run"]["run_id"]
    call("get", "/runs/{run_id}", f"/runs/{rid}")
    call("get", "/runs/{run_id}/wait", f"/runs/{rid}/wait")
    call("get", "/runs/{run_id}/stream", f"/runs/{rid}/stream")
    call("post", "/runs/{run_id}/cancel", f"/runs/{rid}/cancel")
    call("post", "/runs/search", "/runs/search", json={"thread_id": tid})
    call("delete", "/runs/{run_id}", f"/runs/{rid}")
    started = call("post", "/runs", "/runs", json={"on_completion": "keep", **QUESTION}).json()
    http.get(f"/ap/runs/{started['run_id']}/wait")
    call("post", "/runs/stream", "/runs/stream", json={"thread_id": tid, **QUESTION})
    state = {"id": 1, "method": "state.get", "params": {}}
    call("post", "/threads/{thread_id}/commands", f"/threads/{tid}/commands", json=state)
    with http.stream("POST", f"/ap/threads/{tid}/stream", json={"channels": ["lifecycle"]}) as events:
        first = next(events.iter_lines())
        out.append(("post", "/threads/{thread_id}/stream", events))
    sockets.append(first)
    base = str(http.base_url).replace("http://", "ws://").rstrip("/")
    key = {"x-api-key": http.headers["x-api-key"]}
    with connect(f"{base}/ap/threads/{tid}/stream", additional_headers=key) as ws:
        ws.send(json.dumps(state))
        sockets.append(ws.recv(timeout=30))
        out.append(("get", "/threads/{thread_id}/stream", httpx.Response(101)))
    call("post", "/threads/search", "/threads/search", json={"metadata": {"project": "sales"}})
    call("get", "/threads/{thread_id}", f"/threads/{tid}")
    call("get", "/threads/{thread_id}/history", f"/threads/{tid}/history")
    call("patch", "/threads/{thread_id}", f"/threads/{tid}", json={"metadata": {"stage": "reviewed"}})
    copy = call("post", "/threads/{thread_id}/copy", f"/threads/{tid}/copy").json()
    call("delete", "/threads/{thread_id}", f"/threads/{copy['thread_id']}")
    item = {"namespace": ["notes"], "key": "k1", "value": {"text": "sales grew"}}
    call("put", "/store/items", "/store/items", json=item)
    call("get", "/store/items", "/store/items", params={"namespace": "notes", "key": "k1"})
    call("post", "/store/items/search", "/store/items/search", json={"namespace_prefix": ["notes"]})
    call("post", "/store/namespaces", "/store/namespaces", json={})
    call("delete", "/store/items", "/store/items", json={"namespace": ["notes"], "key": "k1"})
    return out


def test_every_operation_answers_and_a_run_is_found_by_its_id_alone(tmp_path: Path, store: StoreSetup) -> None:
    config = store.config(tmp_path, SCRIPT, serve={"api_keys": KEYS})
    with (
        serving(config, tmp_path) as server,
        httpx.Client(base_url=server.url, headers={"x-api-key": ACME}, timeout=120) as http,
    ):
        sockets: list[Any] = []
        answers = _exchange(http, sockets)
        assert {(m, t) for m, t, _ in answers} == OPERATIONS
        failed = [(m, t, r.status_code, r.text[:200]) for m, t, r in answers if r.status_code >= 400]
        assert failed == [("delete", "/runs/{run_id}", 422, failed[0][3])]  # runs stay in the history
        assert "delete the thread" in failed[0][3]

        by = {(m, t): r for m, t, r in answers}
        done = by[("get", "/runs/{run_id}/wait")].json()
        assert done["run"]["status"] == "success" and done["run"]["agent_id"]
        assert done["messages"][-1]["role"] == "assistant" and done["messages"][-1]["content"]
        assert "Summarise the sales" in [m["content"] for m in done["values"]["messages"]]
        events = by[("get", "/runs/{run_id}/stream")].text
        assert "event: metadata" in events and "event: values" in events
        assert by[("post", "/threads/{thread_id}/commands")].json()["result"]["values"]["messages"]
        assert sockets[0].startswith(":") or sockets[0].startswith(("id:", "event:"))  # the stream opened
        assert json.loads(sockets[1])["id"] == 1  # the WebSocket answered the command
        listed = by[("post", "/runs/search")].json()
        assert [r["run_id"] for r in listed] == [done["run"]["run_id"]]
        assert by[("post", "/store/items/search")].json()["items"][0]["value"] == {"text": "sales grew"}

        # The tenant's runs, newest thread first, without naming a thread.
        everything = http.post("/ap/runs/search", json={"limit": 50}).json()
        assert done["run"]["run_id"] in {r["run_id"] for r in everything}
        assert all(r["status"] in ("pending", "error", "success", "timeout", "interrupted") for r in everything)

        # Another tenant finds none of it: the same words as an id that never existed.
        rid = done["run"]["run_id"]
        other = httpx.Client(base_url=server.url, headers={"x-api-key": GLOBEX}, timeout=30)
        for method, path in [
            ("GET", f"/ap/runs/{rid}"),
            ("GET", f"/ap/runs/{rid}/wait"),
            ("POST", f"/ap/runs/{rid}/cancel"),
        ]:
            unknown = str(uuid.uuid4())
            theirs, nobody = other.request(method, path), other.request(method, path.replace(rid, unknown))
            assert theirs.status_code == nobody.status_code == 404, (path, theirs.text)
            assert theirs.json()["detail"].replace(rid, "X") == nobody.json()["detail"].replace(unknown, "X")
        assert other.post("/ap/runs/search", json={}).json() == []
        assert other.post("/ap/threads/search", json={}).json() == []


def test_bad_bodies_are_refused_and_create_nothing(tmp_path: Path, store: StoreSetup) -> None:
    config = store.config(tmp_path, SCRIPT, serve={"api_keys": KEYS})
    with (
        serving(config, tmp_path) as server,
        httpx.Client(base_url=server.url, headers={"x-api-key": ACME}, timeout=60) as http,
    ):
        for body in (
            {"messages": [{"content": "no role"}]},
            {"messages": "not a list"},
            {"stream_mode": "sideways"},
            {"on_completion": "later"},
            {"thread_id": str(uuid.uuid4())},
        ):
            r = http.post("/ap/runs/wait", json=body)
            assert r.status_code in (404, 422), (body, r.status_code, r.text)
        assert http.post("/ap/runs/search", json={"limit": 0}).status_code == 422
        assert http.post("/ap/agents/search", json={"limit": "x"}).status_code == 422
        assert http.get("/ap/agents/nobody").status_code == 404
        assert http.get("/ap/runs/..%2F..%2Fetc").status_code == 404
        assert http.post("/ap/threads/search", json={}).json() == []  # no thread made by a refused run


SPEC = os.environ.get("AGENTRT_AGENT_PROTOCOL_SPEC", "")


@pytest.mark.skipif(
    not SPEC, reason="set AGENTRT_AGENT_PROTOCOL_SPEC to agent-protocol's openapi.json to check against it"
)
def test_answers_match_the_protocols_openapi_document(tmp_path: Path) -> None:
    from jsonschema import Draft202012Validator

    spec = json.loads(Path(SPEC).read_text())
    assert {(m, p) for p, ops in spec["paths"].items() for m in ops} == OPERATIONS

    config = StoreSetup("files").config(tmp_path, SCRIPT, serve={"api_keys": KEYS})
    with (
        serving(config, tmp_path) as server,
        httpx.Client(base_url=server.url, headers={"x-api-key": ACME}, timeout=120) as http,
    ):
        answers = _exchange(http, [])
    problems = []
    for method, template, r in answers:
        responses = spec["paths"][template][method]["responses"]
        if str(r.status_code) not in responses:
            problems.append(f"{method} {template}: {r.status_code} is not a documented answer")
            continue
        documented = responses[str(r.status_code)].get("content", {})
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            if "text/event-stream" not in documented and "application/json" not in documented:
                problems.append(f"{method} {template}: a stream where the document has no content")
            continue
        content = documented.get("application/json")
        if content is None or not r.content:
            continue
        schema = {"components": spec["components"], **content["schema"]}
        for error in Draft202012Validator(schema).iter_errors(r.json()):
            problems.append(f"{method} {template}: {error.json_path}: {error.message[:150]}")
    assert problems == []
