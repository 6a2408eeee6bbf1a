"""`TenantStore` over LangGraph's own SqliteStore: each tenant's calls see its items only, its answers
name its own namespaces, and a listing by suffix never matches the labels the scoping adds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.store.base import InvalidNamespaceError

from agent.session.item_store import TTL_CONFIG
from agent.session.item_store_sqlite import open_sqlite
from agent.session.tenant_store import LazyStore, TenantStore


@pytest.fixture
def stores(tmp_path: Path) -> tuple[TenantStore, TenantStore]:
    base = open_sqlite(tmp_path / "langgraph-store.sqlite", TTL_CONFIG)
    return TenantStore(base, "acme"), TenantStore(base, "globex")


def test_each_tenant_sees_only_its_items_under_its_own_namespaces(stores: tuple[TenantStore, TenantStore]) -> None:
    acme, globex = stores
    acme.put(("users", "alice"), "prefs", {"theme": "dark"})
    acme.put(("a",), "x", {"n": 1})
    globex.put(("users", "alice"), "prefs", {"theme": "light"})
    globex.put(("tenants", "acme", "users", "alice"), "prefs", {"theme": "hijacked"})

    item = acme.get(("users", "alice"), "prefs")
    assert item is not None and item.namespace == ("users", "alice") and item.value == {"theme": "dark"}
    assert acme.get(("tenants", "acme", "users", "alice"), "prefs") is None
    assert {i.value["theme"] for i in globex.search(())} == {"light", "hijacked"}
    assert [i.namespace for i in acme.search(("users",))] == [("users", "alice")]
    assert acme.list_namespaces() == [("a",), ("users", "alice")]
    assert acme.list_namespaces(max_depth=1) == [("a",), ("users",)]
    # ("a",) is stored as ("tenants", "acme", "a"): a suffix ("acme", "a") must not find it.
    assert acme.list_namespaces(suffix=("acme", "a")) == []
    assert acme.list_namespaces(suffix=("*", "a")) == []
    assert acme.list_namespaces(suffix=("a",)) == [("a",)]
    assert globex.list_namespaces(suffix=("alice",), offset=1, limit=1) == [("users", "alice")]

    globex.delete(("users", "alice"), "prefs")
    assert acme.get(("users", "alice"), "prefs") is not None
    with pytest.raises(InvalidNamespaceError):  # LangGraph's own rule, kept for the tenant's namespace
        acme.put(("langgraph", "x"), "k", {})


def test_async_calls_and_a_lazy_store_opened_once(tmp_path: Path) -> None:
    opened: list[Path] = []

    def opener() -> TenantStore:
        opened.append(tmp_path)
        return TenantStore(open_sqlite(tmp_path / "s.sqlite", TTL_CONFIG), "t")

    lazy = LazyStore(opener, TTL_CONFIG)
    assert opened == []  # nothing is opened before the first op
    scoped = TenantStore(lazy, "acme")

    async def go() -> None:
        await scoped.aput(("notes",), "k", {"text": "hi"})
        item = await scoped.aget(("notes",), "k")
        assert item is not None and item.value == {"text": "hi"}

    asyncio.run(go())
    assert scoped.get(("notes",), "k") is not None and len(opened) == 1
