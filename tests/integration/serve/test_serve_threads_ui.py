"""Threads as agent-chat-ui reads them from `agentrt serve`: `/info`, the thread list by `graph_id` /
`assistant_id` and status with each thread's values and interrupts, and the state history paged with
`limit` / `before` as `useStream({fetchStateHistory: true})` asks for it; another tenant sees none of it."""

from __future__ import annotations

import itertools
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from tests.support.runners import make_config
from tests.support.serve import serving

ALICE, GLOBEX = "alice-key-0123456789", "globex-key-0123456789"
KEYS = [{"key": ALICE, "tenant_id": "acme", "user_id": "alice"}, {"key": GLOBEX, "tenant_id": "globex"}]
ASK = {"messages": [{"role": "user", "content": "How did each region do against its target?"}]}


def test_thread_list_status_values_interrupts_and_history_pages(tmp_path: Path) -> None:
    config = make_config(tmp_path, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        info = httpx.get(f"{server.url}/info", headers={"x-api-key": ALICE}, timeout=30).json()
        assert {"version", "langgraph_py_version", "flags", "host"} <= set(info)
        assert info["flags"]["assistants"] is True

        alice = get_sync_client(url=server.url, api_key=ALICE)
        [assistant] = alice.assistants.search(graph_id="agentrt")
        asked = alice.threads.create(metadata={"graph_id": "agentrt"})["thread_id"]
        alice.runs.wait(asked, "agentrt", input=ASK)  # stops at the publish_report approval
        empty = alice.threads.create(graph_id="agentrt")["thread_id"]

        # the list agent-chat-ui shows: by graph_id or assistant_id, newest first, with values
        for meta in ({"graph_id": "agentrt"}, {"assistant_id": assistant["assistant_id"]}):
            listed = alice.threads.search(metadata=meta, limit=100)
            assert [t["thread_id"] for t in listed] == [empty, asked]
        assert alice.threads.search(metadata={"graph_id": "another"}) == []
        [busy_one] = alice.threads.search(status="interrupted", metadata={"graph_id": "agentrt"})
        assert busy_one["thread_id"] == asked and busy_one["status"] == "interrupted"
        humans = [m["content"] for m in busy_one["values"]["messages"] if m["type"] == "human"]
        assert humans == [ASK["messages"][0]["content"]]
        [pending] = [i for found in busy_one["interrupts"].values() for i in found]
        assert pending["value"]["name"] == "publish_report"
        [idle] = alice.threads.search(status="idle")
        assert idle["thread_id"] == empty and idle["values"] == {} and idle["interrupts"] == {}
        assert alice.threads.search(status="busy") == []
        assert alice.threads.search(status="error") == []
        slim = alice.threads.search(select=["thread_id", "status"], status="interrupted")
        assert slim == [{"thread_id": asked, "status": "interrupted"}]

        # history: everything at once, then the same checkpoints a page at a time
        everything = alice.threads.get_history(asked, limit=1000)
        assert len(everything) > 4
        state = alice.threads.get_state(asked)
        assert everything[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
        pages, before = [], None
        while True:
            page = alice.threads.get_history(asked, limit=3, before=before)
            if not page:
                break
            assert len(page) <= 3
            pages.extend(page)
            before = page[-1]["checkpoint"]  # the SDK's `before` as a checkpoint object
        ids = [s["checkpoint"]["checkpoint_id"] for s in everything]
        assert [s["checkpoint"]["checkpoint_id"] for s in pages] == ids
        by_id = alice.threads.get_history(asked, limit=2, before=ids[1])  # `before` as a bare id
        assert [s["checkpoint"]["checkpoint_id"] for s in by_id] == ids[2:4]
        for newer, older in itertools.pairwise(everything):
            assert newer["parent_checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]

        # another tenant: nothing listed, nothing readable
        globex = get_sync_client(url=server.url, api_key=GLOBEX)
        assert globex.threads.search(metadata={"graph_id": "agentrt"}, limit=100) == []
        assert globex.threads.count(status="interrupted") == 0
        with pytest.raises(NotFoundError):
            globex.threads.get_history(asked, limit=10)
