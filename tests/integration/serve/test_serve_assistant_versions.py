"""Assistant versions across servers, and what deleting an assistant does, through langgraph_sdk
against real `agentrt serve` processes: two servers over one store (files and PostgreSQL) updating
one assistant at once lose no version and number them without a gap; a deleted assistant's runs in
flight are cancelled, its crons go, and a run naming it is refused; assistants an earlier agentrt
kept in the LangGraph store are read, and moved into the record store on the first change."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langgraph.store.base import PutOp
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError

from agent.core.config import load_settings
from agent.serve.assistants import ROOT, AssistantStore
from agent.session.assistant_doc import assistants_session, read_assistants
from agent.session.item_store import item_store
from tests.support.runners import make_config
from tests.support.serve import serving, start_server
from tests.support.store_configs import StoreSetup

A = "agentrt"
UPDATES = 12
"""Updates each server makes."""
BOUND_S = 60.0


def _updates(client: SyncLangGraphClient, aid: str, writer: str) -> list[int]:
    return [client.assistants.update(aid, metadata={f"{writer}-{n}": n})["version"] for n in range(UPDATES)]


def test_two_servers_updating_one_assistant_lose_no_version(tmp_path: Path, store: StoreSetup) -> None:
    base = {"persistence": {"base_dir": str(tmp_path / "shared")}} if store.kind == "files" else {}
    config_a, config_b = store.config(tmp_path / "a", **base), store.config(tmp_path / "b", **base)
    first = start_server(config_a, tmp_path / "a")
    try:
        with serving(config_b, tmp_path / "b") as second:
            one, other = get_sync_client(url=first.url), get_sync_client(url=second.url)
            aid = one.assistants.create(A, name="Shared", metadata={"made": 0})["assistant_id"]
            with ThreadPoolExecutor(4) as pool:  # two writers on each server, all at once
                jobs = [pool.submit(_updates, c, aid, f"{c is one}-{k}") for c in (one, other) for k in (1, 2)]
                answered = [v for job in jobs for v in job.result(timeout=BOUND_S * 4)]
            total = 4 * UPDATES + 1
            assert sorted(answered) == list(range(2, total + 1))  # each update got a version of its own

            for client in (one, other):
                versions = client.assistants.get_versions(aid, limit=1000)
                assert [v["version"] for v in versions] == list(range(total, 0, -1))  # contiguous, newest first
                latest = client.assistants.get(aid)
                assert latest["version"] == total
                # Every update's metadata is in the latest (merged) and in its own version onwards.
                assert len(latest["metadata"]) == total
                made_by = {k for v in versions for k in v["metadata"]}
                assert made_by == set(latest["metadata"])
    finally:
        first.stop()


def test_deleting_an_assistant_cancels_its_runs_and_drops_its_crons(tmp_path: Path) -> None:
    with serving(make_config(tmp_path), tmp_path) as server:
        client = get_sync_client(url=server.url)
        aid = client.assistants.create(A, name="Doomed")["assistant_id"]
        tid = client.threads.create()["thread_id"]
        waiting = client.runs.create(tid, aid, input={"user_input": "later"}, after_seconds=600)
        other_tid = client.threads.create()["thread_id"]
        untouched = client.runs.create(other_tid, A, input={"user_input": "later"}, after_seconds=600)
        cron = client.crons.create(aid, schedule="0 0 1 1 *", input={"user_input": "yearly"})
        kept_cron = client.crons.create(A, schedule="0 0 1 1 *", input={"user_input": "yearly"})
        assert client.runs.get(tid, waiting["run_id"])["status"] == "pending"

        client.assistants.delete(aid)

        deadline = time.monotonic() + BOUND_S
        while client.runs.get(tid, waiting["run_id"])["status"] == "pending":
            assert time.monotonic() < deadline, "the deleted assistant's run was never cancelled"
            time.sleep(0.05)
        assert client.runs.get(tid, waiting["run_id"])["status"] == "interrupted"
        assert client.runs.get(other_tid, untouched["run_id"])["status"] == "pending"  # another assistant's
        assert [c["cron_id"] for c in client.crons.search()] == [kept_cron["cron_id"]]
        assert cron["cron_id"] != kept_cron["cron_id"]
        with pytest.raises(NotFoundError):
            client.runs.create(tid, aid, input={"user_input": "again"})
        client.runs.cancel(other_tid, untouched["run_id"])


def test_assistants_an_earlier_agentrt_kept_are_read_then_moved_on_the_first_change(
    tmp_path: Path, store: StoreSetup
) -> None:
    settings = load_settings(store.config(tmp_path))
    items = item_store(settings)
    aid = "6f0d2c4e-1111-4a2b-9c3d-5e6f7a8b9c0d"
    version = {
        "assistant_id": aid,
        "graph_id": A,
        "config": {},
        "context": {},
        "metadata": {"team": "old"},
        "name": "Kept",
        "description": None,
        "version": 1,
        "created_at": "2026-01-01T00:00:00.000000+00:00",
    }
    old = {"assistant": {**version, "updated_at": version["created_at"]}, "versions": [version]}
    items.batch([PutOp((ROOT, "acme"), aid, old, index=False)])
    book = AssistantStore(settings, items, time.time())

    assert book.get("acme", aid)["name"] == "Kept"
    assert [a["name"] for a in book.all("acme")] == [A, "Kept"]
    assert read_assistants(assistants_session(settings, "acme"))[0] is None  # reading moves nothing

    assert book.update("acme", aid, {"name": "Moved"})["version"] == 2
    assert [v["name"] for v in book.versions("acme", aid)] == ["Moved", "Kept"]
    moved, _ = read_assistants(assistants_session(settings, "acme"))
    assert moved is not None and list(moved) == [aid]
    assert items.search((ROOT, "acme")) == []  # the old item went once the document held it
    assert book.all("globex") == [book.builtin]
