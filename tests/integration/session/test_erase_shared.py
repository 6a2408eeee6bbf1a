"""`agentrt erase` deletes what a tenant keeps beside its sessions, on both record stores: the crons
(a user's with `--user`), and with a whole-tenant erase its assistants and store items. Made and
checked through the API of a running `agentrt serve`, erased with the CLI against the same config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import APIStatusError

from tests.support.serve import cli, serving
from tests.support.store_configs import StoreSetup

A = "agentrt"
YEARLY = "0 0 1 1 *"
"""Far away: no cron fires during the test."""
INPUT = {"messages": [{"role": "user", "content": "report"}]}
ALICE, BOB, GLOBEX = "alice-key-0123456789", "bob-key-0123456789ab", "globex-key-0123456789"
KEYS = [
    {"key": ALICE, "tenant_id": "acme", "user_id": "alice"},
    {"key": BOB, "tenant_id": "acme", "user_id": "bob"},
    {"key": GLOBEX, "tenant_id": "globex"},
]


def _erase(config: Path, cwd: Path, *args: str) -> dict[str, Any]:
    ran = cli(config, cwd, "erase", *args, "--yes", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    got: dict[str, Any] = json.loads(ran.stdout)
    return got


def _missing(call: Any) -> bool:
    try:
        call()
    except APIStatusError as err:
        return err.response.status_code == 404
    return False


def test_erase_deletes_crons_assistants_and_items(tmp_path: Path, store: StoreSetup) -> None:
    """erase acme/bob: bob's crons go, alice's cron and acme's items and assistants stay; erase acme:
    every one of acme's crons, assistants and items goes; globex's are untouched throughout."""
    config = store.config(tmp_path, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        alice, bob, globex = (get_sync_client(url=server.url, api_key=k) for k in (ALICE, BOB, GLOBEX))
        tid = alice.threads.create()["thread_id"]
        alice.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)
        alice.crons.create(A, schedule=YEARLY, input=INPUT)
        bob.crons.create(A, schedule=YEARLY, input=INPUT)
        bob.crons.create(A, schedule=YEARLY, input=INPUT)
        theirs = globex.crons.create(A, schedule=YEARLY, input=INPUT)
        assistant = alice.assistants.create(A, name="Acme's", metadata={"team": "ops"})
        alice.assistants.update(assistant["assistant_id"], name="Acme's, v2")
        other = globex.assistants.create(A, name="Globex's")
        for client, key in ((alice, "a1"), (alice, "a2"), (bob, "b1"), (globex, "g1")):
            client.store.put_item(("notes", "deep"), key, {"text": key})

        plan = cli(config, tmp_path, "erase", "--tenant", "acme", "--user", "bob", "--dry-run", "--json")
        assert plan.returncode == 0 and json.loads(plan.stdout)["crons"] == 2, plan.stdout + plan.stderr
        assert bob.crons.count() == 2  # a dry run deletes nothing

        done = _erase(config, tmp_path, "--tenant", "acme", "--user", "bob")
        assert (done["crons"], done["assistants"], done["store_items"]) == (2, 0, 0)
        assert any("store items and assistants are kept" in n for n in done["notes"])
        assert bob.crons.count() == 0 and alice.crons.count() == 2
        assert alice.assistants.get(assistant["assistant_id"])["name"] == "Acme's, v2"
        assert len(alice.store.search_items(("notes",))["items"]) == 3

        shown = cli(config, tmp_path, "erase", "--tenant", "acme", "--yes")
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "2 crons, 1 assistants, 3 store items" in shown.stdout, shown.stdout
        assert alice.crons.count() == 0 and alice.store.search_items(("notes",))["items"] == []
        assert _missing(lambda: alice.assistants.get(assistant["assistant_id"]))
        assert [c["cron_id"] for c in globex.crons.search()] == [theirs["cron_id"]]
        assert globex.assistants.get(other["assistant_id"])["name"] == "Globex's"
        assert [i["key"] for i in globex.store.search_items(("notes",))["items"]] == ["g1"]

        again = cli(config, tmp_path, "erase", "--tenant", "acme", "--yes")
        assert again.returncode == 0 and "nothing to erase for tenant acme" in again.stdout, again.stdout
