"""Runs as Studio uses them, through `langgraph_sdk` against a real `agentrt serve`: double texting
(`multitask_strategy` reject / enqueue / interrupt / rollback), cancel with `action`, breakpoints,
delayed and stateless runs, `if_not_exists`; each checked by what the client sees afterwards (the
runs listed, the thread's state and history), as LangGraph's server shows them.

The slow server plays a looping script with no planning call: every turn is four `nap` tool steps
and an answer, so a turn is in flight long enough for a second run to arrive.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import yaml
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.support.runners import make_config
from tests.support.serve import SLOW_TOOLS, Server, serving

A = "agentrt"
ANSWER = "Rested four times."
TURN = [*({"tool_calls": [{"name": "nap", "args": {"seconds": 0.5}}]} for _ in range(4)), {"content": ANSWER}]
BOUND_S = 60.0


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("runs")
    script = tmp / "loop.yaml"
    script.write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": TURN}, sort_keys=False))
    config = make_config(tmp, tools=SLOW_TOOLS, model={"script": str(script)}, loop={"planning": "never"})
    with serving(config, tmp) as server:
        yield server


@pytest.fixture
def client(slow: Server) -> SyncLangGraphClient:
    return get_sync_client(url=slow.url)


def until(check: Callable[[], Any], what: str) -> Any:
    """Poll `check` until it returns something true (bounded: the test fails, it never hangs)."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {BOUND_S}s: {what}")


def working(client: SyncLangGraphClient, tid: str, text: str) -> dict[str, Any]:
    """Start a slow turn and return its run once it has run its first tool (it is then mid-turn)."""
    run = client.runs.create(tid, A, input={"user_input": text})
    until(lambda: _tools_of(client, tid), "a first tool result")
    return run


def _tools_of(client: SyncLangGraphClient, tid: str) -> int:
    return sum(1 for m in client.threads.get_state(tid)["values"].get("messages") or [] if m["type"] == "tool")


def _humans(client: SyncLangGraphClient, tid: str) -> list[str]:
    return [m["content"] for m in client.threads.get_state(tid)["values"]["messages"] if m["type"] == "human"]


def _statuses(client: SyncLangGraphClient, tid: str) -> dict[str, str]:
    return {r["run_id"]: r["status"] for r in client.runs.list(tid)}


# --- double texting ---------------------------------------------------------------------------------------
def test_reject_refuses_a_second_run_with_409_and_queues_nothing(client):
    tid = client.threads.create()["thread_id"]
    first = working(client, tid, "first")
    with pytest.raises(ConflictError, match="already has a run in flight"):
        client.runs.create(tid, A, input={"user_input": "second"}, multitask_strategy="reject")
    assert list(_statuses(client, tid)) == [first["run_id"]]
    client.runs.join(tid, first["run_id"])
    assert _statuses(client, tid) == {first["run_id"]: "success"}
    assert _humans(client, tid) == ["first"]


def test_enqueue_is_the_default_and_runs_the_second_after_the_first(client):
    tid = client.threads.create()["thread_id"]
    first = working(client, tid, "first")
    second = client.runs.create(tid, A, input={"user_input": "second"})
    assert second["status"] == "pending" and second["multitask_strategy"] == "enqueue"
    assert _statuses(client, tid) == {second["run_id"]: "pending", first["run_id"]: "running"}
    assert client.threads.get(tid)["status"] == "busy"
    values = client.runs.join(tid, second["run_id"])
    assert values["user_input"] == "second" and values["finish_reason"] == "completed"
    assert _statuses(client, tid) == {second["run_id"]: "success", first["run_id"]: "success"}
    assert _humans(client, tid) == ["first", "second"]
    assert client.threads.get(tid)["status"] == "idle"


def test_interrupt_stops_the_running_run_keeps_its_steps_and_runs_the_new_one(client):
    tid = client.threads.create()["thread_id"]
    first = working(client, tid, "first")
    second = client.runs.create(tid, A, input={"user_input": "second"}, multitask_strategy="interrupt")
    values = client.runs.join(tid, second["run_id"])
    assert values["finish_reason"] == "completed"
    assert _statuses(client, tid) == {second["run_id"]: "success", first["run_id"]: "interrupted"}
    # The interrupted run's finished steps stay: its message and at least one tool result, then the new turn.
    assert _humans(client, tid) == ["first", "second"]
    messages = client.threads.get_state(tid)["values"]["messages"]
    first_part = messages[: [m["content"] for m in messages].index("second")]
    assert any(m["type"] == "tool" for m in first_part)
    assert messages[-1]["type"] == "ai" and messages[-1]["content"] == ANSWER


def test_rollback_removes_the_running_run_and_its_writes(client):
    tid = client.threads.create()["thread_id"]
    kept = client.runs.wait(tid, A, input={"user_input": "kept"})
    assert kept["finish_reason"] == "completed"
    [kept_run] = client.runs.list(tid)
    before = {h["checkpoint"]["checkpoint_id"] for h in client.threads.get_history(tid, limit=100)}
    doomed = working(client, tid, "doomed")
    second = client.runs.create(tid, A, input={"user_input": "second"}, multitask_strategy="rollback")
    client.runs.join(tid, second["run_id"])
    assert _statuses(client, tid) == {second["run_id"]: "success", kept_run["run_id"]: "success"}
    with pytest.raises(NotFoundError):
        client.runs.get(tid, doomed["run_id"])
    assert _humans(client, tid) == ["kept", "second"]
    history = client.threads.get_history(tid, limit=200)
    assert before <= {h["checkpoint"]["checkpoint_id"] for h in history}, "the new run went on from the kept state"
    assert all(h["values"].get("user_input") != "doomed" for h in history), "no checkpoint of the rolled-back run"


def test_rollback_of_a_thread_s_first_run_leaves_the_thread_as_it_was_created(client):
    tid = client.threads.create(metadata={"project": "rb"})["thread_id"]
    doomed = working(client, tid, "doomed")
    second = client.runs.create(tid, A, input={"user_input": "second"}, multitask_strategy="rollback")
    client.runs.join(tid, second["run_id"])
    assert _statuses(client, tid) == {second["run_id"]: "success"}
    with pytest.raises(NotFoundError):
        client.runs.get(tid, doomed["run_id"])
    assert _humans(client, tid) == ["second"]
    assert client.threads.get(tid)["metadata"]["project"] == "rb"


# --- cancel ---------------------------------------------------------------------------------------------------
def test_cancel_rollback_deletes_the_run_and_puts_the_state_back(client):
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, A, input={"user_input": "kept"})
    state = client.threads.get_state(tid)
    doomed = working(client, tid, "doomed")
    client.runs.cancel(tid, doomed["run_id"], wait=True, action="rollback")
    with pytest.raises(NotFoundError):
        client.runs.get(tid, doomed["run_id"])
    assert [r["status"] for r in client.runs.list(tid)] == ["success"]
    after = client.threads.get_state(tid)
    assert after["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert after["values"]["messages"] == state["values"]["messages"]
    assert client.threads.get(tid)["status"] == "idle"
    again = client.runs.wait(tid, A, input={"user_input": "after"})
    assert again["finish_reason"] == "completed" and _humans(client, tid) == ["kept", "after"]


def test_cancel_interrupt_of_a_pending_run_means_it_never_starts(client):
    tid = client.threads.create()["thread_id"]
    first = working(client, tid, "first")
    queued = client.runs.create(tid, A, input={"user_input": "never"}, multitask_strategy="enqueue")
    client.runs.cancel(tid, queued["run_id"], action="interrupt")
    assert client.runs.get(tid, queued["run_id"])["status"] == "interrupted"
    client.runs.join(tid, first["run_id"])
    assert _statuses(client, tid) == {queued["run_id"]: "interrupted", first["run_id"]: "success"}
    assert _humans(client, tid) == ["first"]


# --- breakpoints, delays, stateless runs ---------------------------------------------------------------------
def test_interrupt_before_pauses_the_run_and_a_run_without_input_continues(client):
    tid = client.threads.create()["thread_id"]
    stopped = client.runs.wait(tid, A, input={"user_input": "stop"}, interrupt_before=["acting"])
    state = client.threads.get_state(tid)
    assert state["next"] == ["acting"] and not _tools_of(client, tid)
    assert "__interrupt__" not in stopped and stopped["user_input"] == "stop"
    assert client.threads.get(tid)["status"] == "interrupted"
    [paused] = client.runs.list(tid)
    assert paused["status"] == "success" and paused["kwargs"]["interrupt_before"] == ["acting"]
    after = client.runs.wait(tid, A, input=None, interrupt_after=["acting"])
    assert client.threads.get_state(tid)["next"] == ["reasoning"] and _tools_of(client, tid) == 1
    assert after["messages"][-1]["type"] == "tool"
    done = client.runs.wait(tid, A, input=None)
    assert done["finish_reason"] == "completed" and _tools_of(client, tid) == 4
    assert [r["status"] for r in client.runs.list(tid)] == ["success"] * 3


def test_after_seconds_keeps_the_run_pending_then_runs_it(client):
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, A, input={"user_input": "later"}, after_seconds=1)
    assert run["status"] == "pending" and run["kwargs"]["after_seconds"] == 1
    assert client.runs.join(tid, run["run_id"])["finish_reason"] == "completed"
    assert client.runs.get(tid, run["run_id"])["status"] == "success"


def test_stateless_runs_delete_their_thread_unless_asked_to_keep_it(client):
    run = client.runs.create(None, A, input={"user_input": "gone"})
    tid = run["thread_id"]
    assert client.runs.join(tid, run["run_id"])["finish_reason"] == "completed"
    until(lambda: _missing(client, tid), "the stateless thread deleted")
    kept = client.runs.create(None, A, input={"user_input": "kept"}, on_completion="keep")
    client.runs.join(kept["thread_id"], kept["run_id"])
    assert client.threads.get(kept["thread_id"])["thread_id"] == kept["thread_id"]
    assert client.runs.wait(None, A, input={"user_input": "waited"})["finish_reason"] == "completed"
    with pytest.raises(httpx.HTTPStatusError, match="422") as refused:  # runs.wait raises httpx's own error
        client.runs.wait(None, A, command={"resume": True})
    assert "command" in refused.value.response.text


def _missing(client: SyncLangGraphClient, tid: str) -> bool:
    try:
        client.threads.get(tid)
    except NotFoundError:
        return True
    return False


def test_if_not_exists_create_makes_the_thread_and_reject_answers_404(client):
    tid = str(uuid.uuid4())
    with pytest.raises(httpx.HTTPStatusError, match="404"):
        client.runs.wait(tid, A, input={"user_input": "x"}, if_not_exists="reject")
    values = client.runs.wait(tid, A, input={"user_input": "made"}, if_not_exists="create", metadata={"k": "v"})
    assert values["finish_reason"] == "completed"
    assert client.threads.get(tid)["metadata"]["k"] == "v"


# --- runs.wait and resumes, on the default demo (it asks before publish_report) -----------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("demo")
    with serving(make_config(tmp), tmp) as server:
        yield server


def test_a_resume_is_a_run_of_its_own_with_its_own_stream(demo: Server):
    client = get_sync_client(url=demo.url)
    tid = client.threads.create()["thread_id"]
    asked = client.runs.wait(tid, A, input={"user_input": "report revenue by region"})
    [first] = client.runs.list(tid)
    assert asked["__interrupt__"][0]["value"]["name"] == "publish_report"
    answer = client.runs.create(tid, A, command={"resume": {"approved": True}})
    assert answer["run_id"] != first["run_id"]
    client.runs.join(tid, answer["run_id"])
    listed = client.runs.list(tid)
    assert [(r["run_id"], r["status"]) for r in listed] == [(answer["run_id"], "success"), (first["run_id"], "success")]
    assert listed[0]["metadata"]["agentrt_run_id"] == listed[1]["metadata"]["agentrt_run_id"]
    replay = list(client.runs.join_stream(tid, answer["run_id"]))
    assert replay[0].event == "metadata" and replay[0].data["run_id"] == answer["run_id"]
    first_replay = list(client.runs.join_stream(tid, first["run_id"]))
    assert first_replay[-1].data["__interrupt__"][0]["value"]["name"] == "publish_report"


def test_wait_answers_the_thread_s_values_after_the_run(demo: Server):
    client = get_sync_client(url=demo.url)
    tid = client.threads.create()["thread_id"]
    asked = client.runs.wait(tid, A, input={"user_input": "report revenue by region"})
    state = client.threads.get_state(tid)
    assert {k: v for k, v in asked.items() if k != "__interrupt__"} == state["values"]
    assert [i["id"] for i in asked["__interrupt__"]] == [i["id"] for i in state["interrupts"]]
    done = client.runs.wait(tid, A, command={"resume": {"approved": True}})
    assert done == client.threads.get_state(tid)["values"]
    assert done["finish_reason"] == "completed" and "__interrupt__" not in done
