"""Two `agentrt serve` processes over one store (the embedded files store, and PostgreSQL), through
`langgraph_sdk` and the thread-stream protocol: deleting an assistant on one server stops its runs
on the other (a running one after its current step, a pending one before it starts; another
assistant's run goes on), so does `runs.cancel` / `runs.cancel_many` sent to the server that does
not hold the run (which lists it as its holder does), and a thread followed on one server (`threads.join_stream`, the
protocol's `/threads/{id}/stream/events`) gets the runs the other server runs on it, from their
first event to their end."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.support.serve import SLOW_SCRIPT, SLOW_TOOLS, Server, serving
from tests.support.store_configs import KINDS, StoreSetup

A = "agentrt"
BOUND_S = 60.0
TERMINAL = frozenset({"success", "error", "interrupted"})


@contextmanager
def two_servers(
    tmp_path: Path, store: StoreSetup, responses: list[dict[str, Any]] | None = None, **sections: Any
) -> Iterator[tuple[Server, Server]]:
    """Two servers over one store (on files: one base folder)."""
    if store.kind == "files":
        sections["persistence"] = {"base_dir": str(tmp_path / "shared")}
    with (
        serving(store.config(tmp_path / "a", responses, **sections), tmp_path / "a") as one,
        serving(store.config(tmp_path / "b", responses, **sections), tmp_path / "b") as other,
    ):
        yield one, other


@pytest.fixture(scope="module", params=KINDS)
def slow_pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Server]]:
    """Two servers running the slow script over one store of each kind, shared by a file's tests
    (each works on threads of its own, and leaves no run going)."""
    setup = StoreSetup(request.param)
    try:
        with two_servers(
            tmp_path_factory.mktemp(f"pair-{request.param}"), setup, SLOW_SCRIPT, tools=SLOW_TOOLS
        ) as pair:
            yield pair
    finally:
        setup.close()


def _status_within(client: SyncLangGraphClient, tid: str, run_id: str, wanted: set[str]) -> str:
    deadline = time.monotonic() + BOUND_S
    while (status := client.runs.get(tid, run_id)["status"]) not in wanted:
        assert time.monotonic() < deadline, f"run {run_id} stayed {status}"
        time.sleep(0.05)
    return str(status)


def test_deleting_an_assistant_on_one_server_stops_its_runs_on_the_other(slow_pair: tuple[Server, Server]) -> None:
    one, other = slow_pair
    here, there = get_sync_client(url=one.url), get_sync_client(url=other.url)
    aid = here.assistants.create(A, name="Doomed")["assistant_id"]
    tid, queued_tid, kept_tid = (there.threads.create()["thread_id"] for _ in range(3))
    running = there.runs.create(tid, aid, input={"user_input": "rest"})
    queued = there.runs.create(queued_tid, aid, input={"user_input": "later"}, after_seconds=600)
    kept = there.runs.create(kept_tid, A, input={"user_input": "later"}, after_seconds=600)
    _status_within(there, tid, running["run_id"], {"running"})

    here.assistants.delete(aid)

    assert _status_within(there, tid, running["run_id"], TERMINAL) == "interrupted"
    assert _status_within(there, queued_tid, queued["run_id"], TERMINAL) == "interrupted"
    said = [m["content"] for m in there.threads.get_state(tid)["values"].get("messages") or []]
    assert "Rested four times." not in said  # stopped before its last step
    time.sleep(1.0)  # several checks later, another assistant's run is still waiting
    assert there.runs.get(kept_tid, kept["run_id"])["status"] == "pending"
    there.runs.cancel(kept_tid, kept["run_id"])


def test_a_run_cancelled_through_one_server_stops_on_the_other(slow_pair: tuple[Server, Server]) -> None:
    one, other = slow_pair
    here, there = get_sync_client(url=one.url), get_sync_client(url=other.url)
    tid, queued_tid = (there.threads.create()["thread_id"] for _ in range(2))
    running = there.runs.create(tid, A, input={"user_input": "rest"})
    queued = there.runs.create(queued_tid, A, input={"user_input": "later"}, after_seconds=600)
    _status_within(there, tid, running["run_id"], {"running"})
    assert here.runs.get(tid, running["run_id"])["status"] == "running"  # as the server holding it says

    here.runs.cancel(tid, running["run_id"])
    here.runs.cancel_many(thread_id=queued_tid)

    for client in (there, here):
        assert _status_within(client, tid, running["run_id"], TERMINAL) == "interrupted"
        assert _status_within(client, queued_tid, queued["run_id"], TERMINAL) == "interrupted"
    said = [m["content"] for m in there.threads.get_state(tid)["values"].get("messages") or []]
    assert "Rested four times." not in said  # stopped before its last step


def _answer_config(tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "answer.yaml"
    script.write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": [{"content": "Done."}]}))
    return {"model": {"script": str(script)}, "loop": {"planning": "never"}}


def _join(client: SyncLangGraphClient, tid: str, run_id: Future[str]) -> list[tuple[str, Any]]:
    """The thread's stream from now until the end of the run `run_id` names."""
    parts: list[tuple[str, Any]] = []
    for part in client.threads.join_stream(tid, stream_mode="run_modes"):
        parts.append((part.event, part.data))
        done = part.event == "metadata" and part.data.get("status") == "run_done"
        if done and part.data.get("run_id") == run_id.result(timeout=BOUND_S):
            return parts
    raise AssertionError(f"the stream ended before run_done: {parts}")


def _protocol(url: str, tid: str, run_id: Future[str]) -> list[dict[str, Any]]:
    """The thread's protocol events (lifecycle, values) until the run `run_id` names ends."""
    events: list[dict[str, Any]] = []
    body = {"channels": ["lifecycle", "values"]}
    with httpx.stream("POST", f"{url}/threads/{tid}/stream/events", json=body, timeout=BOUND_S) as answer:
        for line in answer.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            events.append(event)
            data = event["params"]["data"]
            ended = event["method"] == "lifecycle" and data.get("event") in ("completed", "failed", "interrupted")
            if ended and data.get("run_id") == run_id.result(timeout=BOUND_S):
                return events
    raise AssertionError(f"the event stream ended before the run did: {events}")


def test_a_thread_followed_on_one_server_gets_the_runs_of_the_other(tmp_path: Path, store: StoreSetup) -> None:
    with two_servers(tmp_path, store, **_answer_config(tmp_path)) as (one, other):
        here, there = get_sync_client(url=one.url), get_sync_client(url=other.url)
        tid = here.threads.create()["thread_id"]
        here.runs.wait(tid, A, input={"user_input": "one"})  # a run over before anyone follows
        started: Future[str] = Future()
        with ThreadPoolExecutor(2) as pool:
            joined = pool.submit(_join, here, tid, started)
            protocol = pool.submit(_protocol, one.url, tid, started)
            time.sleep(1.0)  # both streams open before the run is queued on the other server
            run = there.runs.create(tid, A, input={"user_input": "two"}, after_seconds=1)
            started.set_result(run["run_id"])
            parts, events = joined.result(timeout=BOUND_S), protocol.result(timeout=BOUND_S)

        assert there.runs.join(tid, run["run_id"])["messages"][-1]["content"] == "Done."
        runs = {d.get("run_id") for e, d in parts if e == "metadata"}
        assert runs == {run["run_id"]}  # the run over before is not replayed
        assert parts[0] == ("metadata", {"run_id": run["run_id"], "thread_id": tid, "attempt": 1})
        last_values = [d for e, d in parts if e == "values"][-1]
        assert [m["content"] for m in last_values["messages"]][-3:] == ["Done.", "two", "Done."]
        # The protocol stream replays the run this server held, then follows the other server's.
        phases = [
            (e["params"]["data"]["event"], e["params"]["data"]["run_id"]) for e in events if e["method"] == "lifecycle"
        ]
        assert phases[-2:] == [("running", run["run_id"]), ("completed", run["run_id"])]
        begun = next(
            n
            for n, e in enumerate(events)
            if e["method"] == "lifecycle" and e["params"]["data"]["run_id"] == run["run_id"]
        )
        values = [e["params"]["data"] for e in events[begun:] if e["method"] == "values"]
        assert values and values[-1] == last_values
