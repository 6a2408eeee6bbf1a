"""A tenant's items of the store API moved with `agentrt items export` / `items import`, and the
doctor's `store_items` check, run as a user runs them on the shipped configs (the embedded default:
LangGraph's SqliteStore; production: its PostgresStore)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from langgraph_sdk import get_sync_client

from tests.cli.console import agentrt
from tests.support.serve import serving
from tests.support.store_configs import StoreSetup

pytestmark = pytest.mark.integration

ITEMS = {
    ("users", "alice"): ("prefs", {"theme": "dark", "langs": ["fr", "en"]}),
    ("docs",): ("plan", {"title": "q3 plan", "n": 3}),
}


@pytest.fixture(params=["files", "postgres"])
def setup(request: pytest.FixtureRequest) -> Iterator[StoreSetup]:
    made = StoreSetup(request.param)
    yield made
    made.close()


def _doctor(config: Path, cwd: Path) -> tuple[int, dict[str, object]]:
    ran = agentrt("doctor", "--config", str(config), "--json", cwd=cwd)
    checks = {c["name"]: c for c in json.loads(ran.out)["checks"]}
    return ran.code, checks["store_items"]


def test_items_move_to_another_machine_and_importing_twice_changes_nothing(
    tmp_path: Path, setup: StoreSetup, request: pytest.FixtureRequest
) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    config = setup.config(here)
    with serving(config, here) as server:
        c = get_sync_client(url=server.url)
        for ns, (key, value) in ITEMS.items():
            c.store.put_item(list(ns), key, value)
        c.store.put_item(["cache"], "brief", {"v": 1}, ttl=600)
    ran = agentrt("items", "export", "--config", str(config), "--output", "items.jsonl", cwd=here)
    assert ran.code == 0 and "exported 3 item(s) of tenant default" in ran.err, ran.both
    code, check = _doctor(config, here)
    assert code == 0 and check["status"] == "OK", check
    assert check["evidence"]["items_by_tenant"] == {"default": 3}  # type: ignore[index]

    elsewhere = StoreSetup(setup.kind)  # another machine: its own base_dir (and database)
    request.addfinalizer(elsewhere.close)
    other = elsewhere.config(there)
    file = str(here / "items.jsonl")
    ran = agentrt("items", "import", file, "--config", str(other), cwd=there)
    assert ran.code == 0 and "imported 3 item(s) into tenant default" in ran.out, ran.both
    ran = agentrt("items", "import", file, "--config", str(other), "--json", cwd=there)
    assert ran.code == 0 and json.loads(ran.out) == {"tenant_id": "default", "imported": 0, "already_there": 3}
    with serving(other, there) as server:
        c = get_sync_client(url=server.url)
        for ns, (key, value) in ITEMS.items():
            assert c.store.get_item(list(ns), key)["value"] == value
        c.store.put_item(["docs"], "plan", {"title": "changed here"})
    again = agentrt("items", "export", "--config", str(other), cwd=there)
    lines = [json.loads(line) for line in again.out.splitlines()]
    assert {ln["key"]: ln["ttl_minutes"] for ln in lines[1:-1]} == {"brief": 600, "plan": None, "prefs": None}

    # An item there with another value: nothing is written, the user is told which one.
    ran = agentrt("items", "import", file, "--config", str(other), cwd=there)
    assert ran.code == 4, ran.both
    assert "'plan'" in ran.error_line() and "nothing was imported" in ran.error_line()


def _end(body: str) -> str:
    digest = hashlib.sha256(body.encode()).hexdigest()
    return json.dumps({"end": True, "items": 1, "sha256": digest}) + "\n"


def test_a_damaged_items_file_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    config = StoreSetup("files").config(tmp_path)
    good = (
        '{"format": "agentrt-store-items", "version": 1, "tenant_id": "acme", "items": 1}\n'
        '{"namespace": ["a"], "key": "k", "value": {"v": 1}}\n'
    )
    hostile = good.replace('["a"]', '["a.b", "../x"]')
    cases = {
        "cut.jsonl": good,
        "changed.jsonl": good + '{"end": true, "items": 1, "sha256": "00"}\n',
        "other.jsonl": "hello\n",
        "hostile.jsonl": hostile + _end(hostile),  # well-formed, its checksum right: a label with '.'
        "reserved.jsonl": good.replace('["a"]', '["langgraph"]') + _end(good.replace('["a"]', '["langgraph"]')),
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        ran = agentrt("items", "import", name, "--config", str(config), cwd=tmp_path)
        assert ran.code == 2 and "nothing was imported" in ran.error_line(), (name, ran.both)
    assert not (tmp_path / "agentrt").exists()


def _older_store(setup: StoreSetup, base: Path) -> None:
    """LangGraph's store as an older LangGraph left it: its first two migrations only."""
    if setup.kind == "files":
        from langgraph.store.sqlite.base import MIGRATIONS

        base.mkdir()
        with sqlite3.connect(base / "langgraph-store.sqlite") as conn:
            conn.execute("CREATE TABLE store_migrations (v INTEGER PRIMARY KEY)")
            for v, sql in enumerate(MIGRATIONS[:2]):
                conn.executescript(sql)
                conn.execute("INSERT INTO store_migrations (v) VALUES (?)", (v,))
        return
    from langgraph.store.postgres.base import MIGRATIONS as PG_MIGRATIONS

    from tests.support.celery_drill import database_url

    assert setup.database is not None
    with psycopg.connect(database_url(setup.database), autocommit=True) as conn:
        conn.execute("CREATE TABLE store_migrations (v INTEGER PRIMARY KEY)")
        for v, sql in enumerate(PG_MIGRATIONS[:2]):
            conn.execute(sql)
            conn.execute("INSERT INTO store_migrations (v) VALUES (%s)", (v,))


def test_the_doctor_names_the_repair_of_a_store_an_older_langgraph_made(tmp_path: Path, setup: StoreSetup) -> None:
    config = setup.config(tmp_path)
    code, check = _doctor(config, tmp_path)
    assert code == 0 and check["status"] == "OK" and "no item stored yet" in json.dumps(check)

    _older_store(setup, tmp_path / "agentrt")
    code, check = _doctor(config, tmp_path)
    assert code == 1 and check["status"] == "FAIL" and "misses migrations 2.." in json.dumps(check), check
    assert "agentrt doctor --repair" in str(check["next_step"])
    ran = agentrt("doctor", "--repair", "--config", str(config), cwd=tmp_path)
    assert "applied the missing migrations" in ran.out, ran.both
    code, check = _doctor(config, tmp_path)
    assert code == 0 and check["status"] == "OK", check
    assert check["evidence"]["items_by_tenant"] == {}  # type: ignore[index]


def test_the_doctor_fails_on_a_damaged_store_file_naming_a_backup(tmp_path: Path) -> None:
    config = StoreSetup("files").config(tmp_path)
    (tmp_path / "agentrt").mkdir()
    (tmp_path / "agentrt" / "langgraph-store.sqlite").write_bytes(b"not a database, just bytes" * 100)
    code, check = _doctor(config, tmp_path)
    assert code == 1 and check["status"] == "FAIL" and "from a backup" in str(check["next_step"]), check


def test_a_session_export_carries_no_store_items(tmp_path: Path) -> None:
    """Items are the tenant's, shared by every user: one user's session file must not hand them on."""
    config = StoreSetup("files").config(tmp_path)
    with serving(config, tmp_path) as server:
        get_sync_client(url=server.url).store.put_item(["users", "bob"], "secret", {"note": "bob-private-note"})
    ran = agentrt("run", "--config", str(config), "--json", "Summarise the 2026 sales by region", cwd=tmp_path)
    assert ran.code == 0, ran.both
    sid = json.loads(ran.out)["session_id"]
    exported = agentrt("export", sid, "--config", str(config), cwd=tmp_path)
    assert exported.code == 0 and sid in exported.out and "bob-private-note" not in exported.out
    items = agentrt("items", "export", "--config", str(config), cwd=tmp_path)
    assert items.code == 0 and "bob-private-note" in items.out
