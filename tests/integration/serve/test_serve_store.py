"""The store API of `agentrt serve` driven by `langgraph_sdk`'s `client.store`, on the embedded default
(LangGraph's SqliteStore under base_dir) and on the PostgreSQL store config (LangGraph's
PostgresStore): items, search, namespaces, TTLs, restarts, malformed bodies; two tenants that never
see each other's items; and a run's tools reaching the same store, as its tenant."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.support.serve import Server, serving
from tests.support.store_configs import StoreSetup

ACME, GLOBEX = "acme-key-0123456789ab", "globex-key-0123456789"
KEYS = [{"key": ACME, "tenant_id": "acme", "user_id": "alice"}, {"key": GLOBEX, "tenant_id": "globex"}]
EXPIRY_BOUND_S = 60.0
"""How long a test waits for an item past its ttl to go before it fails (a hang guard, not a timing check)."""


def client(server: Server, key: str) -> SyncLangGraphClient:
    return get_sync_client(url=server.url, api_key=key)


def namespaces(c: SyncLangGraphClient, **kwargs: Any) -> list[list[str]]:
    return list(c.store.list_namespaces(**kwargs)["namespaces"])


def test_each_tenant_reads_searches_lists_and_deletes_only_its_own_items(tmp_path: Path, store: StoreSetup) -> None:
    config = store.config(tmp_path, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        acme, globex = client(server, ACME), client(server, GLOBEX)
        acme.store.put_item(["users", "alice"], "prefs", {"theme": "dark", "rank": 1})
        acme.store.put_item(["users", "bob"], "prefs", {"theme": "light", "rank": 2})
        acme.store.put_item(["docs"], "plan", {"title": "acme-plan", "rank": 3})
        globex.store.put_item(["users", "alice"], "prefs", {"theme": "globex-theme"})
        # Naming the other tenant's labels only makes a namespace of one's own.
        globex.store.put_item(["tenants", "acme", "users", "alice"], "prefs", {"theme": "hijacked"})

        item = acme.store.get_item(["users", "alice"], "prefs")
        assert item["namespace"] == ["users", "alice"] and item["key"] == "prefs"
        assert item["value"] == {"theme": "dark", "rank": 1} and item["created_at"] and item["updated_at"]
        assert globex.store.get_item(["users", "alice"], "prefs")["value"] == {"theme": "globex-theme"}
        assert globex.store.get_item(["docs"], "plan") is None
        acme.store.put_item(["users", "alice"], "prefs", {"theme": "dark", "rank": 1, "v": 2})  # replaces
        assert acme.store.get_item(["users", "alice"], "prefs")["value"]["v"] == 2

        found = acme.store.search_items(["users"])["items"]
        assert sorted((i["namespace"], i["value"]["theme"]) for i in found) == [
            (["users", "alice"], "dark"),
            (["users", "bob"], "light"),
        ]
        assert [i["namespace"] for i in acme.store.search_items(["users"], filter={"theme": "dark"})["items"]] == [
            ["users", "alice"]
        ]
        ranked = acme.store.search_items([], filter={"rank": {"$gte": 2}})["items"]
        assert sorted(i["value"]["rank"] for i in ranked) == [2, 3]
        first, rest = acme.store.search_items([], limit=2)["items"], acme.store.search_items([], offset=2)["items"]
        assert len(first) == 2 and len(rest) == 1
        assert sorted(i["namespace"] for i in first + rest) == [["docs"], ["users", "alice"], ["users", "bob"]]
        theirs = globex.store.search_items([], limit=100)["items"]
        assert sorted(i["namespace"] for i in theirs) == [["tenants", "acme", "users", "alice"], ["users", "alice"]]
        assert "acme-plan" not in json.dumps(theirs) and "dark" not in json.dumps(theirs)
        assert acme.store.get_item(["users", "alice"], "prefs")["value"]["theme"] == "dark"  # not hijacked

        assert namespaces(acme) == [["docs"], ["users", "alice"], ["users", "bob"]]
        assert namespaces(acme, prefix=["users"]) == [["users", "alice"], ["users", "bob"]]
        assert namespaces(acme, max_depth=1) == [["docs"], ["users"]]
        assert namespaces(acme, suffix=["alice"]) == [["users", "alice"]]
        assert namespaces(acme, prefix=["users"], suffix=["*"], max_depth=1) == [["users"]]
        assert namespaces(acme, limit=1, offset=1) == [["users", "alice"]]
        assert namespaces(globex) == [["tenants", "acme", "users", "alice"], ["users", "alice"]]
        # A suffix spelling out the caller's own hidden labels matches nothing more than it says.
        assert namespaces(globex, suffix=["globex", "users", "alice"]) == []
        assert namespaces(globex, suffix=["*", "users", "alice"]) == [["tenants", "acme", "users", "alice"]]

        globex.store.delete_item(["users", "bob"], "prefs")  # globex has none there: acme's stays
        assert acme.store.get_item(["users", "bob"], "prefs")["value"]["theme"] == "light"
        acme.store.delete_item(["users", "bob"], "prefs")
        assert acme.store.get_item(["users", "bob"], "prefs") is None
        assert globex.store.get_item(["users", "alice"], "prefs")["value"] == {"theme": "globex-theme"}

        for method, path, body in (
            ("PUT", "/store/items", {"namespace": ["users", "alice"], "key": "prefs", "value": {}}),
            ("GET", "/store/items?namespace=users.alice&key=prefs", None),
            ("DELETE", "/store/items", {"namespace": ["users", "alice"], "key": "prefs"}),
            ("POST", "/store/items/search", {}),
            ("POST", "/store/namespaces", {}),
        ):
            res = httpx.request(method, server.url + path, json=body, timeout=30)
            assert res.status_code == 401, (method, path, res.status_code)
            assert "dark" not in res.text

    with serving(config, tmp_path) as server:  # a restart: the items are in the store's database
        acme = client(server, ACME)
        assert acme.store.get_item(["users", "alice"], "prefs")["value"]["theme"] == "dark"
        assert namespaces(acme) == [["docs"], ["users", "alice"]]


def test_an_item_past_its_ttl_is_gone_and_others_stay(tmp_path: Path, store: StoreSetup) -> None:
    config = store.config(tmp_path, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        acme, globex = client(server, ACME), client(server, GLOBEX)
        acme.store.put_item(["flash"], "brief", {"v": 1}, ttl=0.02)  # minutes: about a second
        acme.store.put_item(["cache"], "long", {"v": 2}, ttl=600)
        acme.store.put_item(["cache"], "kept", {"v": 3})
        globex.store.put_item(["flash"], "brief", {"v": 4})
        deadline = time.monotonic() + EXPIRY_BOUND_S
        # Reads here leave the ttl alone (a read refreshes it by default).
        while acme.store.get_item(["flash"], "brief", refresh_ttl=False) is not None:
            assert time.monotonic() < deadline, f"an item past its ttl still answered after {EXPIRY_BOUND_S}s"
            time.sleep(0.2)
        assert sorted(i["key"] for i in acme.store.search_items([])["items"]) == ["kept", "long"]
        assert namespaces(acme) == [["cache"]]
        assert acme.store.get_item(["cache"], "long", refresh_ttl=True)["value"] == {"v": 2}
        assert acme.store.get_item(["cache"], "kept")["value"] == {"v": 3}
        assert globex.store.get_item(["flash"], "brief")["value"] == {"v": 4}  # same name, another tenant


def bad_requests() -> list[tuple[str, str, Any, str]]:
    """(method, path, JSON body or raw text, the field the answer must name)."""
    put, search, spaces = "/store/items", "/store/items/search", "/store/namespaces"
    ok = {"namespace": ["a"], "key": "k", "value": {"x": 1}}
    return [
        ("PUT", put, {**ok, "namespace": []}, "namespace"),
        ("PUT", put, {**ok, "namespace": "users"}, "namespace"),
        ("PUT", put, {**ok, "namespace": ["a.b"]}, "namespace"),
        ("PUT", put, {**ok, "namespace": ["a", ""]}, "namespace"),
        ("PUT", put, {**ok, "namespace": [1]}, "namespace"),
        ("PUT", put, {**ok, "namespace": ["a\u0000"]}, "namespace"),
        ("PUT", put, {**ok, "namespace": ["langgraph", "x"]}, "namespace"),
        ("PUT", put, {**ok, "key": ""}, "key"),
        ("PUT", put, {**ok, "key": 5}, "key"),
        ("PUT", put, {**ok, "key": "k\u0000"}, "key"),
        ("PUT", put, {**ok, "value": [1]}, "value"),
        ("PUT", put, {"namespace": ["a"], "key": "k"}, "value"),
        ("PUT", put, {**ok, "value": {"n": 2**70}}, "value"),
        ("PUT", put, {**ok, "value": {"s": "a\u0000b"}}, "value"),
        ("PUT", put, '{"namespace": ["a"], "key": "k", "value": {"x": NaN}}', "value"),
        ("PUT", put, {**ok, "ttl": "soon"}, "ttl"),
        ("PUT", put, {**ok, "ttl": -1}, "ttl"),
        ("PUT", put, {**ok, "ttl": 1e-9}, "ttl"),
        ("PUT", put, {**ok, "ttl": 1e300}, "ttl"),
        ("PUT", put, {**ok, "index": "all"}, "index"),
        ("PUT", put, "not json", "body"),
        ("GET", f"{put}?key=k&namespace=", None, "namespace"),
        ("GET", f"{put}?key=k&namespace=a..b", None, "namespace"),
        ("GET", f"{put}?namespace=a", None, "key"),
        ("GET", f"{put}?namespace=a&key=k&refresh_ttl=maybe", None, "refresh_ttl"),
        ("DELETE", put, {"key": "k"}, "namespace"),
        ("DELETE", put, {"namespace": ["a"], "key": 3}, "key"),
        ("DELETE", put, {"namespace": [], "key": "k"}, "namespace"),
        ("POST", search, {"namespace_prefix": "a"}, "namespace_prefix"),
        ("POST", search, {"namespace_prefix": ["a.b"]}, "namespace_prefix"),
        ("POST", search, {"limit": 0}, "limit"),
        ("POST", search, {"limit": "x"}, "limit"),
        ("POST", search, {"offset": -1}, "offset"),
        ("POST", search, {"filter": [1]}, "filter"),
        ("POST", search, {"filter": {"a'b": 1}}, "filter"),
        ("POST", search, {"filter": {"a.b": 1}}, "filter"),
        ("POST", search, {"filter": {"x": {"$regex": "."}}}, "filter"),
        ("POST", search, {"filter": {"x": "a\u0000"}}, "filter"),
        ("POST", search, {"refresh_ttl": "sometimes"}, "refresh_ttl"),
        ("POST", spaces, {"prefix": ["a."]}, "prefix"),
        ("POST", spaces, {"suffix": [""]}, "suffix"),
        ("POST", spaces, {"max_depth": 0}, "max_depth"),
        ("POST", spaces, {"limit": "x"}, "limit"),
        ("POST", spaces, [1], "body"),
    ]


def test_malformed_store_requests_answer_422_naming_the_field_and_store_nothing(
    tmp_path: Path, store: StoreSetup
) -> None:
    config = store.config(tmp_path, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        wrong = []
        for method, path, body, field in bad_requests():
            kwargs: dict[str, Any] = {"headers": {"x-api-key": ACME}}
            if isinstance(body, str):
                kwargs.update(content=body, headers={**kwargs["headers"], "content-type": "application/json"})
            elif body is not None:
                kwargs["json"] = body
            res = httpx.request(method, server.url + path, timeout=30, **kwargs)
            if res.status_code != 422 or field not in res.text:
                wrong.append(f"{method} {path} {body!r}: {res.status_code} {res.text[:200]}")
        assert wrong == []
        acme = client(server, ACME)
        assert acme.store.search_items([])["items"] == [] and namespaces(acme) == []
        # what the SDK sends, extra fields included, is accepted
        ok = httpx.put(
            f"{server.url}/store/items",
            json={"namespace": ["a"], "key": "k", "value": {"x": 1}, "index": False, "ttl": None, "shiny": 1},
            headers={"x-api-key": ACME},
            timeout=30,
        )
        assert ok.status_code == 204 and acme.store.get_item(["a"], "k")["value"] == {"x": 1}


STORE_SCRIPT: list[dict[str, Any]] = [
    {"content": json.dumps({"plan": "Recall the motto, note the result.", "todos": ["Recall", "Note", "Answer"]})},
    {"tool_calls": [{"name": "recall", "args": {"key": "motto"}}]},
    {"tool_calls": [{"name": "remember", "args": {"key": "result", "text": "q3 up 12%"}}]},
    {"content": "Noted."},
]
STORE_TOOLS = {
    "custom": [
        {"path": "tests.support.store_tools:recall", "effect": "read_only"},
        {"path": "tests.support.store_tools:remember", "effect": "idempotent"},
    ]
}


def test_a_runs_tools_use_the_same_store_as_its_tenant(tmp_path: Path, store: StoreSetup) -> None:
    """A tool (as any node) gets LangGraph's store from `get_store()`: the API's items of the run's
    tenant, and what it writes is that tenant's item."""
    config = store.config(tmp_path, STORE_SCRIPT, tools=STORE_TOOLS, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        acme, globex = client(server, ACME), client(server, GLOBEX)
        acme.store.put_item(["notes"], "motto", {"text": "acme first"})
        globex.store.put_item(["notes"], "motto", {"text": "globex first"})
        tid = acme.threads.create()["thread_id"]
        values = acme.runs.wait(tid, "agentrt", input={"user_input": "What is our motto?"})
        results = " ".join(str(m["content"]) for m in values["messages"] if m["type"] == "tool")
        assert "note motto: acme first" in results and "globex" not in results
        assert acme.store.get_item(["notes"], "result")["value"] == {"text": "q3 up 12%"}
        assert globex.store.get_item(["notes"], "result") is None
        assert namespaces(globex) == [["notes"]]
