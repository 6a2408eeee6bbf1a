"""Several things in one request of `agentrt serve`, through `langgraph_sdk`: `runs.create_batch`
and `threads.prune` (every item checked before any is acted on: a refused request starts and
deletes nothing; another tenant's thread is 404), and what a run does with `on_disconnect` and
`durability`."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import APIStatusError, NotFoundError

from tests.support.serve import Server, serving, slow_config

ASK = {"messages": [{"role": "user", "content": "How did each region do against its target?"}]}
REST = {"user_input": "rest"}
ALICE, GLOBEX = "alice-key-0123456789", "globex-key-0123456789"
KEYS = [{"key": ALICE, "tenant_id": "acme", "user_id": "alice"}, {"key": GLOBEX, "tenant_id": "globex"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("batch")
    with serving(slow_config(tmp, serve={"api_keys": KEYS}), tmp) as running:
        yield running


def _client(server: Server, key: str = ALICE) -> SyncLangGraphClient:
    return get_sync_client(url=server.url, api_key=key)


def test_create_batch_starts_each_run_on_its_thread_or_a_new_one(server: Server) -> None:
    client = _client(server)
    tid = client.threads.create()["thread_id"]
    before = client.threads.count()
    runs = client.runs.create_batch(
        [
            {"thread_id": tid, "assistant_id": "agentrt", "input": REST, "metadata": {"n": 1}},
            {"assistant_id": "agentrt", "input": REST, "on_completion": "keep", "metadata": {"n": 2}},
        ]
    )
    assert [r["metadata"]["n"] for r in runs] == [1, 2] and runs[0]["thread_id"] == tid
    assert runs[1]["thread_id"] != tid
    for run in runs:
        assert client.runs.join(run["thread_id"], run["run_id"])["messages"][-1]["content"] == "Rested four times."
        assert client.runs.get(run["thread_id"], run["run_id"])["status"] == "success"
    assert client.threads.count() == before + 1


@pytest.mark.parametrize(
    ("second", "status", "says"),
    [
        ({"assistant_id": "agentrt", "input": REST, "interrupt_before": ["nowhere"]}, 422, "run 1: interrupt_before"),
        ({"assistant_id": "agentrt", "input": REST, "multitask_strategy": "sometimes"}, 422, "multitask_strategy"),
        ({"assistant_id": "agentrt", "input": REST, "thread_id": "0b9e6a2c-8f2e-4b8e-9a59-1f1f1f1f1f1f"}, 404, ""),
        ({"assistant_id": "nobody", "input": REST}, 404, "assistant"),
    ],
)
def test_a_batch_with_one_bad_run_starts_none(server: Server, second: dict, status: int, says: str) -> None:
    client = _client(server)
    tid = client.threads.create()["thread_id"]
    before = client.threads.count()
    with pytest.raises(APIStatusError) as refused:
        client.runs.create_batch([{"thread_id": tid, "assistant_id": "agentrt", "input": REST}, second])
    assert refused.value.response.status_code == status and says in refused.value.response.text
    assert client.runs.list(tid) == [] and client.threads.count() == before


def test_a_batch_is_refused_empty_with_a_thread_twice_or_on_another_tenants_thread(server: Server) -> None:
    acme, globex = _client(server), _client(server, GLOBEX)
    tid = acme.threads.create()["thread_id"]
    with pytest.raises(APIStatusError) as empty:
        acme.runs.create_batch([])
    assert empty.value.response.status_code == 422
    twice = [{"thread_id": tid, "assistant_id": "agentrt", "input": REST}] * 2
    with pytest.raises(APIStatusError) as dup:
        acme.runs.create_batch(twice)
    assert dup.value.response.status_code == 422 and "more than once" in dup.value.response.text
    with pytest.raises(NotFoundError):
        globex.runs.create_batch(twice[:1])
    assert acme.runs.list(tid) == []


def test_prune_deletes_the_threads_named_or_none_of_them(server: Server) -> None:
    acme, globex = _client(server), _client(server, GLOBEX)
    first, second = (acme.threads.create()["thread_id"] for _ in range(2))
    theirs = globex.threads.create()["thread_id"]
    with pytest.raises(APIStatusError) as keep:
        acme.threads.prune([first], strategy="keep_latest")
    assert keep.value.response.status_code == 422 and "keep_last" in keep.value.response.text
    with pytest.raises(NotFoundError):
        acme.threads.prune([first, theirs])
    with pytest.raises(APIStatusError) as bad:
        acme.threads.prune([first], strategy="everything")  # type: ignore[arg-type]
    assert bad.value.response.status_code == 422 and "strategy" in bad.value.response.text
    assert acme.threads.get(first) and globex.threads.get(theirs)  # nothing deleted by a refusal
    assert acme.threads.prune([first, second, first]) == {"pruned_count": 2}
    for tid in (first, second):
        with pytest.raises(NotFoundError):
            acme.threads.get(tid)
    assert globex.threads.get(theirs)["thread_id"] == theirs
    assert acme.threads.prune([]) == {"pruned_count": 0}


def test_prune_cancels_the_runs_of_a_busy_thread_and_deletes_it(server: Server) -> None:
    client = _client(server)
    idle, busy = (client.threads.create()["thread_id"] for _ in range(2))
    run = client.runs.create(busy, "agentrt", input=REST)
    queued = client.runs.create(busy, "agentrt", input=REST, multitask_strategy="enqueue")
    while client.runs.get(busy, run["run_id"])["status"] != "running":
        time.sleep(0.05)
    assert client.threads.prune([idle, busy]) == {"pruned_count": 2}  # as threads.delete, as LangGraph's server
    for tid in (idle, busy):
        with pytest.raises(NotFoundError):
            client.threads.get(tid)
    for tid, rid in ((busy, run["run_id"]), (busy, queued["run_id"])):
        with pytest.raises(NotFoundError):
            client.runs.get(tid, rid)


@pytest.mark.parametrize(("mode", "status"), [("cancel", "interrupted"), ("continue", "success")])
def test_on_disconnect_cancels_the_run_or_lets_it_finish(server: Server, mode: str, status: str) -> None:
    client = _client(server)
    tid = client.threads.create()["thread_id"]
    stream = client.runs.stream(tid, "agentrt", input=REST, stream_mode="updates", on_disconnect=mode)  # type: ignore[arg-type]
    first = next(iter(stream))
    assert first.event == "metadata"
    stream.close()  # type: ignore[attr-defined]
    client.runs.join(tid, first.data["run_id"])
    assert client.runs.get(tid, first.data["run_id"])["status"] == status


@pytest.mark.parametrize("durability", ["exit", "async", "sync"])
def test_every_durability_keeps_each_step(server: Server, durability: str) -> None:
    """agentrt saves every step's checkpoint before the next, whatever the run asks."""
    client = _client(server)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "agentrt", input=REST, durability=durability)  # type: ignore[arg-type]
    history = client.threads.get_history(tid, limit=100)
    assert len(history) > 5 and history[0]["values"]["messages"][-1]["content"] == "Rested four times."
