"""Assistants of `agentrt serve` through langgraph_sdk: create, versions, latest, search, count and
delete; a run that names one runs with its model and prompt; only the allowlisted settings are
accepted; another tenant never sees one; they outlive a restart, on the files and PostgreSQL stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import APIStatusError

from tests.support.runners import make_config
from tests.support.serve import serving
from tests.support.store_configs import StoreSetup

pytestmark = pytest.mark.integration

PIRATE = "Speak like a pirate."
SCRIPT: list[dict[str, Any]] = [
    {"content": json.dumps({"plan": "Answer.", "todos": ["Answer"]})},
    # Answered only when the system prompt has the pirate's line: a run without it fails.
    {"content": "Arr, done.", "expect_in_prompt": PIRATE},
]
PIRATE_CONFIG = {"model_name": "pirate-model", "system_prompt": PIRATE}
ACME, GLOBEX = "acme-key-0123456789ab", "globex-key-0123456789"
KEYS = [{"key": ACME, "tenant_id": "acme"}, {"key": GLOBEX, "tenant_id": "globex"}]


def _status(call: Any) -> tuple[int, str]:
    with pytest.raises((APIStatusError, httpx.HTTPStatusError)) as refused:
        call()
    return refused.value.response.status_code, refused.value.response.text


def test_create_update_versions_latest_search_count_delete(tmp_path: Path) -> None:
    with serving(make_config(tmp_path, SCRIPT), tmp_path) as server:
        client = get_sync_client(url=server.url)
        made = client.assistants.create(
            "agentrt", context={"system_prompt": "First."}, metadata={"team": "sales"}, name="Sales bot"
        )
        aid = made["assistant_id"]
        assert made["version"] == 1 and made["config"] == {"configurable": {"system_prompt": "First."}}
        assert client.assistants.get(aid)["name"] == "Sales bot"

        updated = client.assistants.update(aid, context={"system_prompt": "Second."}, metadata={"tier": "gold"})
        assert updated["version"] == 2
        assert updated["metadata"] == {"team": "sales", "tier": "gold"}  # merged
        assert updated["context"] == {"system_prompt": "Second."}
        versions = client.assistants.get_versions(aid)
        assert [v["version"] for v in versions] == [2, 1]
        assert [v["version"] for v in client.assistants.get_versions(aid, metadata={"tier": "gold"})] == [2]

        back = client.assistants.set_latest(aid, 1)
        assert back["version"] == 1 and back["context"] == {"system_prompt": "First."}
        assert client.assistants.get(aid)["context"] == {"system_prompt": "First."}
        assert _status(lambda: client.assistants.set_latest(aid, 7))[0] == 404

        other = client.assistants.create("agentrt", name="Another", metadata={"team": "ops"})
        assert client.assistants.count() == 3  # with the built-in one
        assert client.assistants.count(metadata={"team": "sales"}) == 1
        assert [a["name"] for a in client.assistants.search(name="bot")] == ["Sales bot"]
        by_name = client.assistants.search(graph_id="agentrt", sort_by="name", sort_order="asc")
        assert [a["name"] for a in by_name] == ["agentrt", "Another", "Sales bot"]  # any case
        page = client.assistants.search(limit=1, offset=1, sort_by="name", sort_order="asc", response_format="object")
        assert [a["name"] for a in page["assistants"]] == ["Another"] and page["next"] == "2"
        assert client.assistants.search(select=["assistant_id"], metadata={"team": "ops"}) == [
            {"assistant_id": other["assistant_id"]}
        ]

        # The same id again: 409, or the one there with do_nothing.
        assert _status(lambda: client.assistants.create("agentrt", assistant_id=aid))[0] == 409
        kept = client.assistants.create("agentrt", assistant_id=aid, if_exists="do_nothing", name="Ignored")
        assert kept["name"] == "Sales bot" and kept["version"] == 1
        # An update that sends no settings keeps the current ones (those of version 1, made latest).
        renamed = client.assistants.update(aid, name="Renamed", config={})
        assert renamed["version"] == 3 and renamed["context"] == {"system_prompt": "First."}

        # The built-in assistant is the server's own: it cannot change or go.
        assert _status(lambda: client.assistants.delete("agentrt"))[0] == 409
        assert _status(lambda: client.assistants.update("agentrt", name="Mine"))[0] == 409

        client.assistants.delete(aid)
        assert _status(lambda: client.assistants.get(aid))[0] == 404
        assert client.assistants.count() == 2


def test_a_run_uses_its_assistants_model_and_prompt(tmp_path: Path) -> None:
    named = {"assistant_configs": {"pirate": PIRATE_CONFIG}}
    with serving(make_config(tmp_path, SCRIPT, serve=named), tmp_path) as server:
        client = get_sync_client(url=server.url)
        pirate = client.assistants.create("agentrt", context=PIRATE_CONFIG, name="Pirate")
        by_name = client.assistants.create("agentrt", config={"configurable": {"config_name": "pirate"}})
        for assistant in (pirate, by_name):
            tid = client.threads.create()["thread_id"]
            chunks = list(
                client.runs.stream(tid, assistant["assistant_id"], input={"user_input": "hi"}, stream_mode="values")
            )
            last = chunks[-1].data["messages"][-1]
            assert last["content"] == "Arr, done."
            assert last["response_metadata"]["model_name"] == "pirate-model"
            [run] = client.runs.list(tid)
            assert run["assistant_id"] == assistant["assistant_id"] and run["status"] == "success"

        # The built-in assistant runs the server's own prompt: the script's answer is refused.
        tid = client.threads.create()["thread_id"]
        with pytest.raises(Exception, match="expected the prompt to contain 'Speak like a pirate"):
            client.runs.wait(tid, "agentrt", input={"user_input": "hi"})


FORBIDDEN: list[tuple[dict[str, Any], str]] = [
    ({"config": {"configurable": {"tools": ["os:system"]}}}, "config.configurable.tools"),
    ({"context": {"model": {"script": "/etc/passwd"}}}, "context.model"),
    ({"context": {"skills_dir": "/tmp"}}, "context.skills_dir"),
    ({"config": {"recursion_limit": 5}}, "config.recursion_limit"),
    ({"context": {"max_iterations": 10_000}}, "context.max_iterations"),
    ({"context": {"config_name": "nope"}}, "context.config_name"),
    ({"context": {"temperature": "hot"}}, "context.temperature"),
    ({"assistant_id": "not-a-uuid"}, "assistant_id"),
]


def test_forbidden_settings_are_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    with serving(make_config(tmp_path, SCRIPT), tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        for kwargs, named in FORBIDDEN:
            status, text = _status(lambda kwargs=kwargs: client.assistants.create("agentrt", **kwargs))
            assert status == 422 and named in text, (named, text)
            # A run's own configurable goes through the same allowlist.
            given = (kwargs.get("config") or {}).get("configurable") or kwargs.get("context") or {"module": "os"}
            status, text = _status(
                lambda given=given: client.runs.wait(
                    tid, "agentrt", input={"user_input": "hi"}, config={"configurable": given}
                )
            )
            assert status == 422 and "config.configurable." in text, (named, text)
        assert client.assistants.count() == 1  # only the built-in one
        assert client.runs.list(tid) == []


def test_unknown_graph_and_bad_bodies_answer_422(tmp_path: Path) -> None:
    with serving(make_config(tmp_path, SCRIPT), tmp_path) as server:
        client = get_sync_client(url=server.url)
        status, text = _status(lambda: client.assistants.create("other-graph"))
        assert status == 422 and "graph_id" in text
        bad = httpx.post(f"{server.url}/assistants", json={"graph_id": "agentrt", "name": 5})
        assert bad.status_code == 422 and "name" in bad.text
        aid = client.assistants.create("agentrt")["assistant_id"]
        bad = httpx.post(f"{server.url}/assistants/{aid}/latest", json={"version": "first"})
        assert bad.status_code == 422 and "version" in bad.text
        assert client.assistants.count() == 2


def test_the_graph_is_drawn_with_xray(tmp_path: Path) -> None:
    with serving(make_config(tmp_path, SCRIPT), tmp_path) as server:
        client = get_sync_client(url=server.url)
        aid = client.assistants.create("agentrt")["assistant_id"]
        plain = client.assistants.get_graph(aid)
        for xray in (True, 1, 3):
            drawn = client.assistants.get_graph(aid, xray=xray)
            assert {n["id"] for n in drawn["nodes"]} >= {n["id"] for n in plain["nodes"]} and drawn["edges"]
        for bad in ("-1", "0", "deep"):
            r = httpx.get(f"{server.url}/assistants/{aid}/graph", params={"xray": bad})
            assert r.status_code == 422 and "xray" in r.text
        schemas = client.assistants.get_schemas(aid)
        assert schemas["graph_id"] == "agentrt"
        assert {"model_name", "system_prompt", "config_name"} <= set(schemas["context_schema"]["properties"])
        assert client.assistants.get_subgraphs(aid) == {}


def test_another_tenant_never_sees_an_assistant(tmp_path: Path) -> None:
    with serving(make_config(tmp_path, SCRIPT, serve={"api_keys": KEYS}), tmp_path) as server:
        acme = get_sync_client(url=server.url, api_key=ACME)
        globex = get_sync_client(url=server.url, api_key=GLOBEX)
        aid = acme.assistants.create("agentrt", context=PIRATE_CONFIG, metadata={"secret": "yes"})["assistant_id"]
        calls = {
            "get": lambda: globex.assistants.get(aid),
            "update": lambda: globex.assistants.update(aid, name="taken"),
            "delete": lambda: globex.assistants.delete(aid),
            "versions": lambda: globex.assistants.get_versions(aid),
            "latest": lambda: globex.assistants.set_latest(aid, 1),
            "graph": lambda: globex.assistants.get_graph(aid),
            "schemas": lambda: globex.assistants.get_schemas(aid),
            "run": lambda: globex.runs.wait(None, aid, input={"user_input": "hi"}),
        }
        for name, call in calls.items():
            assert _status(call)[0] == 404, name
        assert [a["assistant_id"] for a in globex.assistants.search()] != [aid]
        assert globex.assistants.count(metadata={"secret": "yes"}) == 0
        # Globex may make an assistant with the same id: it is its own.
        mine = globex.assistants.create("agentrt", assistant_id=aid, name="Globex's")
        assert mine["name"] == "Globex's" and acme.assistants.get(aid)["name"] != "Globex's"
        assert acme.assistants.get(aid)["version"] == 1


def test_assistants_outlive_a_restart(tmp_path: Path, store: StoreSetup) -> None:
    config = store.config(tmp_path, SCRIPT)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        aid = client.assistants.create("agentrt", context={"system_prompt": "First."}, name="Kept")["assistant_id"]
        client.assistants.update(aid, context=PIRATE_CONFIG)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        again = client.assistants.get(aid)
        assert again["name"] == "Kept" and again["version"] == 2 and again["context"] == PIRATE_CONFIG
        assert [v["version"] for v in client.assistants.get_versions(aid)] == [2, 1]
        tid = client.threads.create()["thread_id"]
        done = client.runs.wait(tid, aid, input={"user_input": "hi"})
        assert done["messages"][-1]["content"] == "Arr, done."


def test_a_continuation_keeps_the_settings_its_run_started_with(tmp_path: Path) -> None:
    """The demo asks before it publishes: the answer continues under the assistant's settings, which
    the run's checkpoints record; another assistant's settings cannot continue it."""
    ask = {"messages": [{"role": "user", "content": "How did each region do against its target?"}]}
    with serving(make_config(tmp_path), tmp_path) as server:
        client = get_sync_client(url=server.url)
        aid = client.assistants.create("agentrt", context={"model_name": "demo-assistant"})["assistant_id"]
        other = client.assistants.create("agentrt", context={"model_name": "someone-else"})["assistant_id"]
        tid = client.threads.create()["thread_id"]
        asked = client.runs.wait(tid, aid, input=ask)
        assert asked["__interrupt__"][0]["value"]["kind"] == "tool_approval"
        [newest] = client.threads.get_history(tid, limit=1)
        assert json.loads(newest["metadata"]["overrides"]) == {"model_name": "demo-assistant"}

        status, text = _status(lambda: client.runs.wait(tid, other, command={"resume": {"approved": True}}))
        assert status == 409, text

        # The built-in assistant has no settings of its own: the run goes on under its assistant's.
        done = client.runs.wait(tid, "agentrt", command={"resume": {"approved": True}})
        assert done["messages"][-1]["response_metadata"]["model_name"] == "demo-assistant"
        assert client.threads.get(tid)["status"] == "idle"
