"""Crons of `agentrt serve` through langgraph_sdk's `client.crons`: create (for a thread, stateless),
search, count, update, delete; a due cron fires one run, also with two servers over one store
(files and PostgreSQL); another tenant never sees a cron; a cron whose run failed shows it.

A cron is made due without waiting for its minute: the test moves its `next_run_date` into the past
in the store (`tests.support.cron_tools.make_due`), and the servers poll every 0.1 s."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import APIStatusError

from tests.support.cron_tools import make_due
from tests.support.serve import serving, start_server
from tests.support.store_configs import StoreSetup

pytestmark = pytest.mark.integration

A = "agentrt"
YEARLY = "0 0 1 1 *"
"""A schedule whose next time is far away: a run it starts in a test is one the test made due."""
HELLO = [{"content": "Hello from the cron."}]
QUICK = {"loop": {"planning": "never"}, "serve": {"cron_poll_s": 0.1}}
BOUND_S = 60.0
SETTLE_S = 1.0
"""How long after a firing the servers keep polling before a test counts runs (ten polls each)."""
ALICE, BOB, GLOBEX = "alice-key-0123456789", "bob-key-0123456789ab", "globex-key-0123456789"
KEYS = [
    {"key": ALICE, "tenant_id": "acme", "user_id": "alice"},
    {"key": BOB, "tenant_id": "acme", "user_id": "bob"},
    {"key": GLOBEX, "tenant_id": "globex"},
]
INPUT = {"messages": [{"role": "user", "content": "report"}]}


def until(check: Callable[[], Any], what: str) -> Any:
    """Poll `check` until it returns something true (bounded: the test fails, it never hangs)."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {BOUND_S}s: {what}")


def cron_of(client: SyncLangGraphClient, cron_id: str) -> dict[str, Any]:
    """The cron as `crons.search` answers it."""
    return next(c for c in client.crons.search(limit=100) if c["cron_id"] == cron_id)


def finished(client: SyncLangGraphClient, cron_id: str) -> dict[str, Any] | None:
    """The cron's last run once it is over (None before)."""
    last = cron_of(client, cron_id).get("last_run") or {}
    return last if last.get("status") in ("success", "error", "interrupted") else None


def test_create_search_count_update_delete(tmp_path: Path) -> None:
    """Every `client.crons` call; a bad schedule or a wrong type is a 422 naming the field and
    stores nothing; an end time in the past leaves no next run."""
    config = StoreSetup("files").config(tmp_path, HELLO, **QUICK)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        assert httpx.get(f"{server.url}/info").json()["flags"]["crons"] is True
        tid = client.threads.create()["thread_id"]
        mine = client.crons.create_for_thread(tid, A, schedule="15 4 1 1 *", input=INPUT, metadata={"team": "ops"})
        other = client.crons.create(A, schedule=YEARLY, input=INPUT, on_run_completed="keep")
        assert mine["thread_id"] == tid and mine["schedule"] == "15 4 1 1 *" and mine["enabled"] is True
        assert mine["metadata"] == {"team": "ops"} and mine["payload"]["input"] == INPUT
        first = datetime.fromisoformat(mine["next_run_date"])
        assert (first.month, first.day, first.hour, first.minute) == (1, 1, 4, 15)
        assert other["thread_id"] is None and other["on_run_completed"] == "keep"

        assert httpx.get(f"{server.url}/runs/crons/{mine['cron_id']}").json() == mine
        assert client.crons.count() == 2
        assert client.crons.count(thread_id=tid) == 1
        assert client.crons.count(assistant_id="someone-else") == 0
        assert [c["cron_id"] for c in client.crons.search(thread_id=tid)] == [mine["cron_id"]]
        assert [c["cron_id"] for c in client.crons.search(limit=1)] == [other["cron_id"]]  # newest first
        assert [c["cron_id"] for c in client.crons.search(limit=1, offset=1)] == [mine["cron_id"]]
        by_next = client.crons.search(sort_by="next_run_date", sort_order="asc")
        assert [c["cron_id"] for c in by_next] == [other["cron_id"], mine["cron_id"]]
        assert client.crons.search(select=["cron_id", "schedule"], thread_id=tid) == [
            {"cron_id": mine["cron_id"], "schedule": "15 4 1 1 *"}
        ]

        paused = client.crons.update(mine["cron_id"], enabled=False)
        assert paused["enabled"] is False and paused["next_run_date"] is None
        assert [c["cron_id"] for c in client.crons.search(enabled=False)] == [mine["cron_id"]]
        moved = client.crons.update(mine["cron_id"], schedule="0 9 1 1 *", enabled=True, metadata={"team": "sales"})
        assert moved["schedule"] == "0 9 1 1 *" and datetime.fromisoformat(moved["next_run_date"]).hour == 9
        assert moved["metadata"] == {"team": "sales"} and moved["payload"]["input"] == INPUT
        ended = client.crons.update(other["cron_id"], end_time=datetime.now(UTC) - timedelta(days=1))
        assert ended["next_run_date"] is None

        for bad, field in (
            ({"schedule": "every minute"}, "schedule"),
            ({"schedule": "* * * * * *"}, "schedule"),
            ({"schedule": 5}, "schedule"),
            ({"schedule": "* * * * *", "enabled": "yes"}, "enabled"),
            ({"schedule": "* * * * *", "end_time": "tomorrow"}, "end_time"),
        ):
            refused = httpx.post(f"{server.url}/runs/crons", json={"assistant_id": A, "input": INPUT, **bad})
            assert refused.status_code == 422 and field in refused.text, (bad, refused.text)
        no_input = httpx.post(f"{server.url}/runs/crons", json={"assistant_id": A, "schedule": YEARLY})
        assert no_input.status_code == 422 and "input" in no_input.text
        with pytest.raises(APIStatusError) as wrong:
            client.crons.update(mine["cron_id"], schedule="61 * * * *")
        assert wrong.value.response.status_code == 422 and "schedule" in wrong.value.response.text
        with pytest.raises(APIStatusError) as missing:
            client.crons.create_for_thread("no-such-thread", A, schedule=YEARLY, input=INPUT)
        assert missing.value.response.status_code == 404
        assert client.crons.count() == 2  # nothing refused was kept

        client.crons.delete(other["cron_id"])
        assert [c["cron_id"] for c in client.crons.search()] == [mine["cron_id"]]
        with pytest.raises(APIStatusError) as gone:
            client.crons.delete(other["cron_id"])
        assert gone.value.response.status_code == 404
        client.threads.delete(tid)  # its crons go with it
        assert client.crons.count() == 0


def test_due_cron_fires_one_run_across_two_servers(tmp_path: Path, store: StoreSetup) -> None:
    """Two servers over one store poll the same crons: the due firing of a thread's cron starts
    exactly one run (named in the cron's `last_run`, the run's metadata naming the cron), and a
    stateless cron's run gets a thread of its own, kept with `on_run_completed: keep`."""
    base = {"persistence": {"base_dir": str(tmp_path / "shared")}} if store.kind == "files" else {}
    config_a = store.config(tmp_path / "a", HELLO, **QUICK, **base)
    config_b = store.config(tmp_path / "b", HELLO, **QUICK, **base)
    first = start_server(config_a, tmp_path / "a")
    try:
        with serving(config_b, tmp_path / "b") as second:
            client = get_sync_client(url=first.url)
            tid = client.threads.create()["thread_id"]
            cron = client.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)
            other_client = get_sync_client(url=second.url)
            kept = other_client.crons.create(A, schedule=YEARLY, input=INPUT, on_run_completed="keep")
            assert client.crons.count() == 2  # made on either server, seen by both

            make_due(config_a, "default", cron["cron_id"])
            make_due(config_b, "default", kept["cron_id"])
            last = until(lambda: finished(client, cron["cron_id"]), "the thread cron's run")
            other = until(lambda: finished(client, kept["cron_id"]), "the stateless cron's run")
            time.sleep(SETTLE_S)  # both servers poll again: a second claim of the firing would start a run now

            runs = client.runs.list(tid)
            assert [r["run_id"] for r in runs] == [last["run_id"]]
            assert runs[0]["status"] == "success" and runs[0]["metadata"]["cron_id"] == cron["cron_id"]
            assert last["status"] == "success" and last["thread_id"] == tid and last["error"] is None
            assert cron_of(client, cron["cron_id"])["next_run_date"] == cron["next_run_date"]  # next year's

            assert other["status"] == "success" and other["thread_id"] not in (None, tid)
            thread_runs = client.runs.list(other["thread_id"])
            assert [r["run_id"] for r in thread_runs] == [other["run_id"]]
            assert thread_runs[0]["metadata"]["cron_id"] == kept["cron_id"]
    finally:
        first.stop()


def test_stateless_cron_deletes_its_thread_by_default(tmp_path: Path) -> None:
    """A stateless cron's run goes to a new thread, deleted once the run is over."""
    config = StoreSetup("files").config(tmp_path, HELLO, **QUICK)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        cron = client.crons.create(A, schedule=YEARLY, input=INPUT)
        make_due(config, "default", cron["cron_id"])
        last = until(lambda: finished(client, cron["cron_id"]), "the cron's run")
        assert last["status"] == "success"
        until(lambda: client.threads.search(limit=100) == [], "its thread deleted")


def test_another_tenant_never_sees_a_cron(tmp_path: Path, store: StoreSetup) -> None:
    """globex (another tenant) and bob (another user of acme) neither find, count, get, change nor
    delete alice's cron (404 on its id), nor make a cron on her thread; her cron is unchanged."""
    config = store.config(tmp_path, HELLO, loop=QUICK["loop"], serve={"api_keys": KEYS, "cron_poll_s": 0.1})
    with serving(config, tmp_path) as server:
        alice = get_sync_client(url=server.url, api_key=ALICE)
        tid = alice.threads.create()["thread_id"]
        cron = alice.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)

        for key in (GLOBEX, BOB):
            other = get_sync_client(url=server.url, api_key=key)
            assert other.crons.search(limit=100) == [] and other.crons.count() == 0
            assert other.crons.count(thread_id=tid) == 0
            _all_not_found(other, cron["cron_id"], tid)
        assert alice.crons.search() == [cron]


def _all_not_found(other: SyncLangGraphClient, cron_id: str, tid: str) -> None:
    for call in (
        lambda: other.crons.update(cron_id, enabled=False),
        lambda: other.crons.delete(cron_id),
        lambda: other.http.get(f"/runs/crons/{cron_id}"),
        lambda: other.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT),
    ):
        with pytest.raises(APIStatusError) as refused:
            call()
        assert refused.value.response.status_code == 404


def test_a_failed_cron_run_shows_its_error(tmp_path: Path) -> None:
    """A cron whose run fails (the model has nothing to say) has the run's id, `error` status and
    message in its `last_run`; the thread's run is listed as `error`."""
    config = StoreSetup("files").config(tmp_path, [], **QUICK)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        cron = client.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)
        make_due(config, "default", cron["cron_id"])
        last = until(lambda: finished(client, cron["cron_id"]), "the cron's run")
        assert last["status"] == "error" and "scripted model" in last["error"]["message"]
        runs = client.runs.list(tid)
        assert [(r["run_id"], r["status"]) for r in runs] == [(last["run_id"], "error")]
