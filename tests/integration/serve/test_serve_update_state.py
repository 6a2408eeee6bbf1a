"""Editing a thread's state through `langgraph_sdk` (`threads.update_state`) against a real
`agentrt serve`: the edit forks the thread (a new branch holds the edited state, the branch it came
from keeps its history and entries byte for byte), the next run continues from the edit, and
another tenant, a run in flight, a bad body or an unknown node are refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.support.runners import make_config
from tests.support.serve import SLOW_TOOLS, Server, answering_config, serving

A = "agentrt"
ACME, GLOBEX = "acme-key-0123456789ab", "globex-key-0123456789"
KEYS = [{"key": ACME, "tenant_id": "acme"}, {"key": GLOBEX, "tenant_id": "globex"}]
NOTE = "Remember: the answer is 42."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("editstate")
    config = answering_config(tmp, serve={"api_keys": KEYS})
    with serving(config, tmp) as srv:
        yield srv


@pytest.fixture
def acme(server: Server) -> SyncLangGraphClient:
    return get_sync_client(url=server.url, api_key=ACME)


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


def _history(client: SyncLangGraphClient, tid: str) -> list[tuple[str, list[str], list[str]]]:
    """(checkpoint id, message texts, next nodes) of each state of the current branch, newest first."""
    return [
        (h["checkpoint"]["checkpoint_id"], _texts(h), h["next"]) for h in client.threads.get_history(tid, limit=100)
    ]


def test_an_edit_at_the_head_forks_and_the_next_run_continues_from_it(acme: SyncLangGraphClient, server: Server):
    tid = _thread(acme, "first question")
    before_state, before_history, before_events = acme.threads.get_state(tid), _history(acme, tid), _events(server, tid)
    head = before_state["checkpoint"]["checkpoint_id"]

    out = acme.threads.update_state(tid, {"messages": [{"type": "human", "content": NOTE}]})

    assert out["checkpoint"]["thread_id"] == tid
    assert out["checkpoint"]["checkpoint_id"] != head
    state = acme.threads.get_state(tid)
    assert state["checkpoint"]["checkpoint_id"] == out["checkpoint"]["checkpoint_id"]
    assert _texts(state) == [*_texts(before_state), NOTE]
    assert state["parent_checkpoint"]["checkpoint_id"] == head
    thread = acme.threads.get(tid)
    assert thread["branch_id"] != "main"
    # The branch edited away from: its entries are byte for byte what they were (the fork appends).
    assert _events(server, tid).startswith(before_events)
    assert _history(acme, tid)[1:] == before_history

    acme.runs.wait(tid, A, input={"user_input": "second question"})
    after = _texts(acme.threads.get_state(tid))
    assert after[: len(before_state["values"]["messages"]) + 2] == [*_texts(before_state), NOTE, "second question"]
    assert after[-1] == "Done."


def test_an_edit_at_an_earlier_checkpoint_leaves_the_original_branch_as_it_was(
    acme: SyncLangGraphClient, server: Server
):
    tid = _thread(acme, "one", "two")
    before_history, before_events = _history(acme, tid), _events(server, tid)
    # The state at the end of the first turn (nothing next, "two" not asked yet).
    earlier_cp, earlier_texts = next(
        (cp, texts) for cp, texts, nxt in before_history if not nxt and texts and "two" not in texts
    )

    out = acme.threads.update_state(tid, {"messages": [{"type": "human", "content": NOTE}]}, checkpoint_id=earlier_cp)

    state = acme.threads.get_state(tid)
    assert _texts(state) == [*earlier_texts, NOTE]
    assert "two" not in _texts(state)
    assert state["parent_checkpoint"]["checkpoint_id"] == earlier_cp
    # threads.search shows the fresh branch's state too (read without the session document).
    (found,) = acme.threads.search(ids=[tid])
    assert _texts(found) == [*earlier_texts, NOTE]
    assert _events(server, tid).startswith(before_events)
    for cp, texts, _ in before_history:  # each checkpoint of the original branch reads as before
        assert _texts(acme.threads.get_state(tid, checkpoint_id=cp)) == texts

    acme.runs.wait(tid, A, input={"user_input": "three"})
    after = _texts(acme.threads.get_state(tid))
    assert after[: len(earlier_texts) + 2] == [*earlier_texts, NOTE, "three"]
    assert "two" not in after
    assert out["checkpoint"]["checkpoint_id"] in [cp for cp, _, _ in _history(acme, tid)]


def test_another_tenant_cannot_edit_and_unknown_ids_are_404(acme: SyncLangGraphClient, server: Server):
    tid = _thread(acme, "private")
    before = _events(server, tid)
    globex = get_sync_client(url=server.url, api_key=GLOBEX)
    with pytest.raises(NotFoundError):
        globex.threads.update_state(tid, {"messages": [{"type": "human", "content": "hijack"}]})
    with pytest.raises(NotFoundError):
        acme.threads.update_state(tid, {"messages": []}, checkpoint_id="1f0aaaaa-0000-6000-8000-000000000000")
    with pytest.raises(NotFoundError):
        acme.threads.update_state("no-such-thread", {"messages": []})
    assert _events(server, tid) == before
    assert "hijack" not in _texts(acme.threads.get_state(tid))


@pytest.mark.parametrize(
    "body",
    [
        {"values": "not an object"},
        {"values": {"messages": []}, "as_node": "no_such_node"},
        {"values": {"messages": []}, "checkpoint_id": 7},
        {},
        {"values": {"no_such_key": 1}},
        {"values": {"messages": [{"neither": "role nor type"}]}},
    ],
)
def test_bad_bodies_are_422_and_change_nothing(acme: SyncLangGraphClient, server: Server, body: dict[str, Any]):
    tid = _thread(acme, "keep me")
    before, branch = _events(server, tid), acme.threads.get(tid)["branch_id"]
    r = httpx.post(f"{server.url}/threads/{tid}/state", json=body, headers={"x-api-key": ACME}, timeout=30)
    assert r.status_code == 422, r.text
    assert _events(server, tid) == before
    assert acme.threads.get(tid)["branch_id"] == branch


def test_an_edit_while_a_run_is_in_flight_is_refused(tmp_path: Path):
    script = tmp_path / "naps.yaml"
    naps = [{"tool_calls": [{"name": "nap", "args": {"seconds": 0.5}}]} for _ in range(6)]
    script.write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": [*naps, {"content": "Rested."}]}))
    config = make_config(tmp_path, tools=SLOW_TOOLS, model={"script": str(script)}, loop={"planning": "never"})
    with serving(config, tmp_path) as srv:
        client = get_sync_client(url=srv.url)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, A, input={"user_input": "rest a while"})
        deadline = time.monotonic() + 60
        while client.threads.get(tid)["status"] != "busy" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.threads.get(tid)["status"] == "busy"
        with pytest.raises(ConflictError):
            client.threads.update_state(tid, {"messages": [{"type": "human", "content": NOTE}]})
        client.runs.join(tid, run["run_id"])
        assert client.threads.get(tid)["branch_id"] == "main"
        assert NOTE not in _texts(client.threads.get_state(tid))


def test_a_run_without_input_continues_the_edit_from_the_node_after_as_node(acme: SyncLangGraphClient):
    tid = _thread(acme, "one")
    before = _texts(acme.threads.get_state(tid))

    acme.threads.update_state(tid, {"messages": [{"type": "human", "content": NOTE}]}, as_node="reasoning")

    edited = acme.threads.get_state(tid)
    assert edited["next"] == ["refining"]  # as if `reasoning` had written the note
    assert edited["metadata"]["source"] == "update"
    acme.runs.wait(tid, A, input=None)
    after = acme.threads.get_state(tid)
    assert _texts(after)[: len(before) + 1] == [*before, NOTE]
    assert after["next"] == []
    assert acme.threads.get(tid)["status"] == "idle"


def test_a_thread_paused_for_an_approval_is_refused_until_answered(tmp_path: Path):
    with serving(make_config(tmp_path), tmp_path) as srv:  # the demo script asks to publish its report
        client = get_sync_client(url=srv.url)
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, A, input={"user_input": "report revenue by region"})
        assert client.threads.get(tid)["status"] == "interrupted"
        with pytest.raises(ConflictError):
            client.threads.update_state(tid, {"messages": [{"type": "human", "content": NOTE}]})
        assert client.threads.get(tid)["branch_id"] == "main"
        assert NOTE not in _texts(client.threads.get_state(tid))
