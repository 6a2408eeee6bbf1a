"""Two tenants (and two users of one tenant) with their keys: no endpoint gives away another's data,
on the files store and on the PostgreSQL store."""

from __future__ import annotations

from pathlib import Path

import httpx
from langgraph_sdk import get_sync_client

from tests.support.runners import make_config
from tests.support.serve import serving
from tests.support.store_configs import StoreSetup

ALICE, BOB, GLOBEX = "alice-key-0123456789", "bob-key-0123456789ab", "globex-key-0123456789"
KEYS = [
    {"key": ALICE, "tenant_id": "acme", "user_id": "alice"},
    {"key": BOB, "tenant_id": "acme", "user_id": "bob"},
    {"key": GLOBEX, "tenant_id": "globex"},
]


def _probe(url: str, key: str | None, tid: str, run_id: str, cp: str, call: str) -> list[tuple[str, str, int, str]]:
    """Every endpoint that takes a thread, run, checkpoint or tool-call id, called with `key`."""
    headers = {"x-api-key": key} if key else {}
    calls = [
        ("GET", f"/threads/{tid}", None),
        ("GET", f"/threads/{tid}/state", None),
        ("GET", f"/threads/{tid}/state/{cp}", None),
        ("POST", f"/threads/{tid}/state/checkpoint", {"checkpoint": {"checkpoint_id": cp}}),
        ("POST", f"/threads/{tid}/history", {"limit": 5}),
        ("GET", f"/threads/{tid}/history", None),
        ("PATCH", f"/threads/{tid}", {"metadata": {"x": 1}}),
        ("POST", f"/threads/{tid}/copy", None),
        ("DELETE", f"/threads/{tid}", None),
        ("GET", f"/threads/{tid}/runs", None),
        ("GET", f"/threads/{tid}/runs/{run_id}", None),
        ("GET", f"/threads/{tid}/runs/{run_id}/join", None),
        ("GET", f"/threads/{tid}/runs/{run_id}/stream", None),
        ("POST", f"/threads/{tid}/runs/{run_id}/cancel", None),
        ("POST", f"/threads/{tid}/runs", {"assistant_id": "agentrt", "command": {"resume": True}}),
        ("POST", f"/threads/{tid}/runs/wait", {"assistant_id": "agentrt", "input": None}),
        ("POST", f"/threads/{tid}/runs/stream", {"assistant_id": "agentrt", "input": {"user_input": "x"}}),
        ("GET", f"/ui/sessions/{tid}", None),
        ("GET", f"/ui/sessions/{tid}/tool-results/{call}", None),
        ("GET", f"/ui/sessions/{tid}/doctor", None),
        ("GET", f"/ui/sessions/{tid}/live", None),
        ("POST", f"/ui/sessions/{tid}/end", None),
        ("POST", f"/ui/sessions/{tid}/turn", None),
        ("POST", f"/ui/sessions/{tid}/switch-branch", None),
        ("POST", f"/ui/sessions/{tid}/rename-branch", None),
        ("POST", f"/ui/sessions/{tid}/delete-branch", None),
    ]
    out = []
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        for method, path, body in calls:
            r = http.request(method, path, json=body) if body is not None else http.request(method, path)
            out.append((method, path, r.status_code, r.text))
    return out


def test_no_endpoint_returns_another_tenants_or_users_data(tmp_path: Path, store: StoreSetup):
    config = store.config(tmp_path, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        alice = get_sync_client(url=server.url, api_key=ALICE)
        tid = alice.threads.create(metadata={"secret": "acme-plan"})["thread_id"]
        values = alice.runs.wait(tid, "agentrt", input={"user_input": "acme revenue"})
        state = alice.threads.get_state(tid)
        cp = state["checkpoint"]["checkpoint_id"]
        run_id = alice.runs.list(tid)[0]["run_id"]
        call = next(m["tool_call_id"] for m in values["messages"] if m["type"] == "tool")
        assert httpx.get(f"{server.url}/ui/sessions/{tid}/tool-results/{call}", headers={"x-api-key": ALICE}).is_success

        for key in (GLOBEX, BOB):
            for method, path, status, text in _probe(server.url, key, tid, run_id, cp, call):
                assert status in (404, 422), f"{method} {path} with another principal's key: {status} {text[:200]}"
                assert "acme-plan" not in text and "acme revenue" not in text
            other = get_sync_client(url=server.url, api_key=key)
            assert tid not in [t["thread_id"] for t in other.threads.search(limit=100)]
            assert tid not in httpx.get(f"{server.url}/", headers={"x-api-key": key}).text
        for method, path, status, _ in _probe(server.url, None, tid, run_id, cp, call):
            assert status in (401, 303), f"{method} {path} without a key: {status}"
        for method, path, status, _ in _probe(server.url, "wrong-key-0123456789", tid, run_id, cp, call):
            assert status in (401, 303), f"{method} {path} with a wrong key: {status}"

        # The page: a browser signs in once; its cookie is scoped exactly like the key.
        with httpx.Client(base_url=server.url) as browser:
            assert browser.get("/").headers.get("location") == "/ui/login"
            assert browser.post("/ui/login", data={"key": "not-a-key-0123456789"}).status_code == 401
            signed = browser.post("/ui/login", data={"key": GLOBEX})
            assert signed.status_code == 303 and "httponly" in signed.headers["set-cookie"].lower()
            assert browser.get("/").status_code == 200 and tid not in browser.get("/").text
            assert browser.get(f"/ui/sessions/{tid}").status_code == 404
        # A form posted from another site cannot steer a session, even with the owner's credentials.
        before = alice.threads.get(tid)["session_status"]
        evil = httpx.post(
            f"{server.url}/ui/sessions/{tid}/end", headers={"x-api-key": ALICE, "origin": "http://evil.example"}
        )
        assert evil.status_code == 401
        assert alice.threads.get(tid)["session_status"] == before != "ENDED"

        # Alice still has everything, untouched.
        assert alice.threads.get(tid)["metadata"]["secret"] == "acme-plan"
        assert alice.threads.get_state(tid)["checkpoint"]["checkpoint_id"] == cp
        # A thread id copied into another tenant names that tenant's own (new, empty) thread.
        globex = get_sync_client(url=server.url, api_key=GLOBEX)
        mine = globex.threads.create(thread_id=tid)
        assert mine["thread_id"] == tid and globex.threads.get_state(tid)["values"] == {}
        assert alice.threads.get_state(tid)["checkpoint"]["checkpoint_id"] == cp


def test_pluggable_auth_function_scopes_by_what_it_returns(tmp_path: Path):
    config = make_config(tmp_path, serve={"auth": "tests.support.serve_auth:by_bearer"})
    with serving(config, tmp_path) as server:
        a = get_sync_client(url=server.url, headers={"Authorization": "Bearer t1.u1"})
        b = get_sync_client(url=server.url, headers={"Authorization": "Bearer t2.u1"})
        tid = a.threads.create()["thread_id"]
        assert [t["thread_id"] for t in a.threads.search()] == [tid]
        assert b.threads.search() == []
        assert httpx.get(f"{server.url}/threads/{tid}", headers={"Authorization": "Bearer t2.u1"}).status_code == 404
        assert httpx.get(f"{server.url}/threads/{tid}").status_code == 401
