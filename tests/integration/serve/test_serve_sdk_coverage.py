"""Every public method of langgraph_sdk's assistants, threads, runs and crons clients is driven by some
test, or is listed here as not served (none is today)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import AssistantsClient, CronClient, RunsClient, ThreadsClient
from langgraph_sdk.errors import APIStatusError

from tests.support.runners import make_config
from tests.support.serve import Server, serving

TESTS = Path(__file__).resolve().parents[2]
NOT_SERVED: dict[str, str] = {}
"""Methods `agentrt serve` does not answer yet, and what they are."""


def _public(cls: type) -> list[str]:
    return sorted(n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_"))


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(p.title() for p in rest)


def test_every_assistants_threads_runs_and_crons_method_is_tested_or_listed_as_not_served() -> None:
    sources = [p.read_text(encoding="utf-8") for p in TESTS.rglob("*.py")]
    sources.append((TESTS / "js" / "scenarios.mjs").read_text(encoding="utf-8"))
    text = "\n".join(sources)
    untested = []
    for group, cls in (
        ("assistants", AssistantsClient),
        ("threads", ThreadsClient),
        ("runs", RunsClient),
        ("crons", CronClient),
    ):
        for name in _public(cls):
            called = re.search(rf"\.{group}\.({name}|{_camel(name)})\(", text)
            if not called and f"{group}.{name}" not in NOT_SERVED:
                untested.append(f"{group}.{name}")
    assert untested == [], "no test calls these langgraph_sdk methods; add a scenario"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    base = tmp_path_factory.mktemp("coverage")
    with serving(make_config(base), base) as server:
        client = get_sync_client(url=server.url)
        thread = client.threads.create(metadata={"team": "sales"})
        client.runs.wait(thread["thread_id"], "agentrt", input={"messages": [{"role": "user", "content": "hi"}]})
        run = client.runs.list(thread["thread_id"])[0]
        yield server, thread["thread_id"], run["run_id"]


def test_thread_update_run_delete_and_cancel_many(served: tuple[Server, str, str]) -> None:
    """threads.update merges metadata; runs.delete is refused with the reason (the session keeps every
    run); runs.cancel_many on finished runs changes nothing."""
    server, tid, rid = served
    client = get_sync_client(url=server.url)
    updated = client.threads.update(tid, metadata={"quarter": "Q4"})
    assert updated["metadata"]["team"] == "sales" and updated["metadata"]["quarter"] == "Q4"
    assert client.threads.get(tid)["metadata"]["quarter"] == "Q4"
    with pytest.raises(APIStatusError) as refused:
        client.runs.delete(tid, rid)
    assert refused.value.response.status_code == 422 and "delete the thread" in refused.value.response.text
    client.runs.cancel_many(thread_id=tid, run_ids=[rid])
    assert client.runs.get(tid, rid)["status"] == "success"
