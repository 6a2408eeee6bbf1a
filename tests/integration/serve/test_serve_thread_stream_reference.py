"""The thread streams, batches and pruning of `agentrt serve` beside `langgraph dev` (LangGraph's own
server) on the same graph, through `langgraph_sdk`: what the reference sends, agentrt sends too,
field by field.

Differences on purpose (docs/reference/http-api.md): agentrt also streams `updates`, `tasks`,
`checkpoints` and `custom` to a thread stream, names each lifecycle's `run_id` and gives
`input.requested` a `value` beside its `payload` (the SDK's `thread.interrupts` reads `value`),
and sends the messages of `values` as `threads.get_state` has them (the reference rewrites them
into content blocks);
refused commands answer 422 where the reference answers 400 or a 200 error envelope; `prune`
answers 404 for an id the caller cannot see where the reference skips it; a batch item's
`thread_id` is honoured where the reference runs it on a new thread; event ids of a thread join
are `<run id>:<n>`, not Redis stream ids.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import APIStatusError

from tests.support.langgraph_dev import langgraph_dev, needs_langgraph_cli
from tests.support.runners import make_config
from tests.support.serve import serving

pytestmark = [pytest.mark.integration, needs_langgraph_cli]

ASK = {"messages": [{"role": "user", "content": "How did each region do against its target?"}]}
BOUND_S = 60.0
RUN_FIELDS = {"run_id", "thread_id", "assistant_id", "metadata", "status", "kwargs", "multitask_strategy"}


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`agentrt serve` and `langgraph dev` on the demo graph, by name."""
    ours, theirs = tmp_path_factory.mktemp("ours"), tmp_path_factory.mktemp("theirs")
    with serving(make_config(ours), ours) as server, langgraph_dev(theirs, make_config(theirs)) as reference:
        yield {"agentrt": server.url, "reference": reference}


def _both(urls: dict[str, str]) -> dict[str, SyncLangGraphClient]:
    return {name: get_sync_client(url=url) for name, url in urls.items()}


def _sse(lines: Iterator[str]) -> Iterator[tuple[str, Any]]:
    name, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def _holds(ours: Any, theirs: Any) -> None:
    """Every field the reference sends, agentrt sends with the same value (extra fields allowed)."""
    assert isinstance(ours, dict) and isinstance(theirs, dict), (ours, theirs)
    for key, value in theirs.items():
        assert key in ours, (key, ours)
        if isinstance(value, dict):
            _holds(ours[key], value)
        else:
            assert ours[key] == value, (key, ours[key], value)


def _until_asked(client: SyncLangGraphClient) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A thread stream's events up to the approval it asks for, and the output once answered."""
    with client.threads.stream(assistant_id="agentrt") as thread:
        thread.run.start(input=ASK)
        deadline = time.monotonic() + BOUND_S
        while not thread.interrupted:
            assert time.monotonic() < deadline, "the approval never reached the client"
            time.sleep(0.05)
        events = []
        for event in thread.events:
            events.append(event)
            if event["method"] == "input.requested":
                break
        thread.run.respond({"approved": True})
        return events, thread.output


def test_threads_stream_sends_what_the_reference_sends(urls: dict[str, str]) -> None:
    got = {name: _until_asked(client) for name, client in _both(urls).items()}
    (ours, our_output), (theirs, their_output) = got["agentrt"], got["reference"]
    for events in (ours, theirs):
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert all({"type", "event_id", "seq", "method", "params"} <= set(e) for e in events)
        assert all({"namespace", "timestamp", "data"} <= set(e["params"]) for e in events)
    assert {e["method"] for e in theirs} <= {e["method"] for e in ours}
    _holds(ours[0], {k: v for k, v in theirs[0].items() if k not in ("event_id", "params")})
    _holds(ours[0]["params"], {k: v for k, v in theirs[0]["params"].items() if k != "timestamp"})
    asked = {name: events[-1]["params"]["data"] for name, events in (("ours", ours), ("theirs", theirs))}
    assert asked["ours"]["payload"] == asked["theirs"]["payload"] and asked["ours"]["interrupt_id"]
    last = {name: [e for e in events if e["method"] == "values"][-1] for name, events in (("o", ours), ("t", theirs))}
    # The reference rewrites the messages of `values` into content blocks; agentrt sends them as
    # `threads.get_state` does: the same messages, in LangChain's shape.
    assert len(last["o"]["params"]["data"]["messages"]) == len(last["t"]["params"]["data"]["messages"])
    starts = [
        [e["params"]["data"]["role"] for e in events if e["params"]["data"].get("event") == "message-start"]
        for events in (ours, theirs)
    ]
    assert starts[0] == starts[1]
    assert [m["type"] for m in our_output["messages"]] == [m["type"] for m in their_output["messages"]]


def test_a_thread_join_sends_the_reference_lifecycle(urls: dict[str, str]) -> None:
    seen = {}
    for name, client in _both(urls).items():
        tid = client.threads.create()["thread_id"]
        with httpx.stream("GET", f"{urls[name]}/threads/{tid}/stream?stream_modes=lifecycle", timeout=BOUND_S) as live:
            run = client.runs.create(tid, "agentrt", input=ASK)
            parts = []
            for part in _sse(live.iter_lines()):
                parts.append(part)
                if part[1].get("status") == "run_done":
                    break
        assert [p[1]["run_id"] for p in parts] == [run["run_id"]] * 2
        seen[name] = [(event, {k: v for k, v in data.items() if k != "run_id"}) for event, data in parts]
    assert [e for e, _ in seen["agentrt"]] == [e for e, _ in seen["reference"]] == ["metadata", "metadata"]
    for ours, theirs in zip(seen["agentrt"], seen["reference"], strict=True):
        _holds(ours[1], theirs[1])


def test_prune_and_batches_answer_as_the_reference(urls: dict[str, str]) -> None:
    answers: dict[str, dict[str, Any]] = {}
    for name, client in _both(urls).items():
        made = [client.threads.create()["thread_id"] for _ in range(2)]
        client.runs.create(made[1], "agentrt", input={"user_input": "hi"}, after_seconds=60)  # a busy thread
        with pytest.raises(APIStatusError) as keep:
            client.threads.prune(made, strategy="keep_latest")
        with pytest.raises(APIStatusError) as empty:
            client.runs.create_batch([])
        runs = client.runs.create_batch([{"assistant_id": "agentrt", "input": {"user_input": "hi"}}] * 2)
        answers[name] = {
            "pruned": client.threads.prune(made),
            "refused": (keep.value.response.status_code, empty.value.response.status_code),
            "runs": runs,
        }
    ours, theirs = answers["agentrt"], answers["reference"]
    assert ours["pruned"] == theirs["pruned"] == {"pruned_count": 2}  # the busy one too
    assert ours["refused"] == theirs["refused"] == (422, 422)
    assert len(ours["runs"]) == len(theirs["runs"]) == 2
    for mine, reference in zip(ours["runs"], theirs["runs"], strict=True):
        assert set(mine) >= RUN_FIELDS and set(reference) >= RUN_FIELDS
        assert mine["assistant_id"] == reference["assistant_id"]
        assert mine["multitask_strategy"] == reference["multitask_strategy"]
        assert mine["status"] in ("pending", "running") and reference["status"] in ("pending", "running")
    assert len({r["thread_id"] for r in ours["runs"]}) == 2  # each on a thread of its own, as the reference


def test_malformed_commands_and_channels_are_refused_by_both(urls: dict[str, str]) -> None:
    for url in urls.values():
        tid = "5b2f4bc4-3f7b-4a39-9a8e-3f0c2a1b7d11"
        assert httpx.post(f"{url}/threads/{tid}/commands", json={}).status_code in (400, 422)
        refused = httpx.post(f"{url}/threads/{tid}/stream/events", json={"channels": ["bogus"]})
        assert refused.status_code in (400, 422) and "bogus" in refused.text
        assert httpx.get(f"{url}/threads/{tid}").status_code == 404
