"""Deleting threads through `langgraph_sdk`, against a real `agentrt serve` and `langgraph dev` on
the same slow graph, answered alike: `threads.delete` of an idle thread, of one already gone, of an
unknown one, with extra query params, of a thread with a pending run and of one with a run going
(LangGraph's server cancels that run and deletes the thread: so does agentrt), and
`assistants.delete(..., delete_threads=True)`, which takes the threads whose newest run ran the
assistant and leaves the others. (A thread id that is no UUID answers 422 there and 404 here:
agentrt's thread ids are not only UUIDs.)"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.support.langgraph_dev import langgraph_dev, needs_langgraph_cli
from tests.support.runners import make_config
from tests.support.serve import SLOW_SCRIPT, SLOW_TOOLS, serving

pytestmark = [needs_langgraph_cli]

A = "agentrt"
BOUND_S = 60.0
GONE = 404


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`agentrt serve` and `langgraph dev` on the slow script, by name."""
    ours, theirs = tmp_path_factory.mktemp("ours"), tmp_path_factory.mktemp("theirs")
    with serving(_config(ours), ours) as server, langgraph_dev(theirs, _config(theirs)) as reference:
        yield {"agentrt": server.url, "reference": reference}


def _config(where: Path) -> Path:
    """The slow script (about four seconds a run), started over for each run it runs out on."""
    script = where / "slow.yaml"
    script.write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": SLOW_SCRIPT}))
    return make_config(where, model={"script": str(script)}, tools=SLOW_TOOLS)


def _code(call: Callable[[], Any]) -> int:
    try:
        call()
    except httpx.HTTPStatusError as err:
        return err.response.status_code
    return 204


def _running(client: SyncLangGraphClient, tid: str, run_id: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while client.runs.get(tid, run_id)["status"] == "pending":
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.05)


def _deletes(client: SyncLangGraphClient) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tid = client.threads.create()["thread_id"]
    out["idle"] = _code(lambda: client.threads.delete(tid))
    out["again"] = _code(lambda: client.threads.delete(tid))
    out["unknown"] = _code(lambda: client.threads.delete("1f0aaaaa-0000-6000-8000-000000000000"))
    tid = client.threads.create()["thread_id"]
    out["params"] = _code(lambda: client.threads.delete(tid, params={"unused": "1"}))
    tid = client.threads.create()["thread_id"]
    client.runs.create(tid, A, input={"user_input": "later"}, after_seconds=600)
    out["pending"] = (_code(lambda: client.threads.delete(tid)), _code(lambda: client.threads.get(tid)))
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, A, input={"user_input": "rest"})
    _running(client, tid, run["run_id"])
    out["running"] = (_code(lambda: client.threads.delete(tid)), _code(lambda: client.threads.get(tid)))
    ids = {t["thread_id"] for t in client.threads.search(limit=1000)}
    out["running_listed"] = tid in ids
    return out


def _delete_with_threads(client: SyncLangGraphClient) -> dict[str, Any]:
    aid = client.assistants.create(A, name="Doomed")["assistant_id"]
    ran, ran_then_other, untouched, going = (client.threads.create()["thread_id"] for _ in range(4))
    # Whether a run ends well does not matter here, only which assistant it ran.
    client.runs.wait(ran, aid, input={"user_input": "rest"}, raise_error=False)
    client.runs.wait(ran_then_other, aid, input={"user_input": "rest"}, raise_error=False)
    client.runs.wait(ran_then_other, A, input={"user_input": "rest"}, raise_error=False)
    run = client.runs.create(going, aid, input={"user_input": "rest"})
    _running(client, going, run["run_id"])
    deleted = _code(lambda: client.assistants.delete(aid, delete_threads=True))
    kept = {
        name: _code(lambda t=t: client.threads.get(t))
        for name, t in (("ran", ran), ("ran_then_other", ran_then_other), ("untouched", untouched), ("going", going))
    }
    return {"delete": deleted, "threads": kept, "assistant": _code(lambda: client.assistants.get(aid))}


def test_thread_deletes_answer_as_the_reference(urls: dict[str, str]) -> None:
    got = {name: _deletes(get_sync_client(url=url, timeout=BOUND_S)) for name, url in urls.items()}
    assert got["agentrt"] == got["reference"]
    assert got["agentrt"] == {
        "idle": 204,
        "again": GONE,
        "unknown": GONE,
        "params": 204,
        "pending": (204, GONE),
        "running": (204, GONE),
        "running_listed": False,
    }


def test_deleting_an_assistant_with_its_threads_answers_as_the_reference(urls: dict[str, str]) -> None:
    got = {name: _delete_with_threads(get_sync_client(url=url, timeout=BOUND_S)) for name, url in urls.items()}
    assert got["agentrt"] == got["reference"]
    assert got["agentrt"] == {
        "delete": 204,
        "threads": {"ran": GONE, "ran_then_other": 204, "untouched": 204, "going": GONE},
        "assistant": GONE,
    }
