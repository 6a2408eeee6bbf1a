"""A cron firing whose server stopped between claiming it and recording its run is neither lost
nor run twice (files and PostgreSQL stores; tenant acme through a user's key; on PostgreSQL the
server taking over shares no folder with the one that made the crons).

A stopped server's leftovers are written into the store as that server leaves them: the cron's
`last_run` `pending` with no run id, claimed some time ago (`strand`); and a drill kills servers
at random instants (`AGENTRT_CRON_KILLS`, 5 by default, 30 with `AGENTRT_FULL_DRILLS=1`). The
servers poll every 0.1 s (0.05 in the drill)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from agent.core.config import load_settings
from agent.runner.services import build_lease
from agent.serve.crons import CronBook, firing_run_id, firing_thread_id, iso
from agent.session.hold import SessionHold
from tests.integration.serve.test_serve_crons import (
    HELLO,
    INPUT,
    SETTLE_S,
    YEARLY,
    A,
    cron_of,
    finished,
    until,
)
from tests.support.cron_tools import make_due, strand
from tests.support.drills import size
from tests.support.serve import env, free_port, serving
from tests.support.store_configs import StoreSetup

KEY = "acme-alice-key-0123456789"
KEYS = [{"key": KEY, "tenant_id": "acme", "user_id": "alice"}]
LOOP = {"planning": "never"}


def run_ids(client: SyncLangGraphClient, thread_id: str) -> list[str]:
    """The ids of the thread's runs, newest first."""
    return [r["run_id"] for r in client.runs.list(thread_id)]


def test_a_stranded_firing_runs_once_on_the_server_that_takes_it_over(tmp_path: Path, store: StoreSetup) -> None:
    """Firings claimed ten minutes ago with no run start on the next server's poll, each once,
    with the run id (and a stateless firing's thread id) the firing's time gives and its `fired_at`
    kept; a firing claimed just now by a server that may still be starting it is left alone."""
    base = {"persistence": {"base_dir": str(tmp_path / "shared")}} if store.kind == "files" else {}
    made_by = store.config(tmp_path / "a", HELLO, loop=LOOP, serve={"api_keys": KEYS, "cron_poll_s": None}, **base)
    with serving(made_by, tmp_path / "a") as first:
        alice = get_sync_client(url=first.url, api_key=KEY)
        tid, quiet_tid = alice.threads.create()["thread_id"], alice.threads.create()["thread_id"]
        on_thread = alice.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)
        stateless = alice.crons.create(A, schedule=YEARLY, input=INPUT, on_run_completed="keep")
        recent = alice.crons.create_for_thread(quiet_tid, A, schedule=YEARLY, input=INPUT)

    now = datetime.now(UTC)
    fired_at = iso(now - timedelta(minutes=10))
    assert fired_at is not None
    for cron in (on_thread, stateless):
        strand(made_by, "acme", cron["cron_id"], fired_at, fired_at)
    strand(made_by, "acme", recent["cron_id"], iso(now) or "", iso(now) or "")

    serve = {"api_keys": KEYS, "cron_poll_s": 0.1, "cron_takeover_s": 300}
    takes_over = store.config(tmp_path / "b", HELLO, loop=LOOP, serve=serve, **base)
    with serving(takes_over, tmp_path / "b") as second:
        alice = get_sync_client(url=second.url, api_key=KEY)
        last = until(lambda: finished(alice, on_thread["cron_id"]), "the stranded thread cron's run")
        other = until(lambda: finished(alice, stateless["cron_id"]), "the stranded stateless cron's run")
        time.sleep(SETTLE_S)  # ten more polls: a second start of either firing would show now

        assert last["status"] == "success" and last["fired_at"] == fired_at and last["thread_id"] == tid
        assert last["run_id"] == firing_run_id("acme", on_thread["cron_id"], fired_at)
        assert run_ids(alice, tid) == [last["run_id"]]

        assert other["status"] == "success" and other["fired_at"] == fired_at
        assert other["thread_id"] == firing_thread_id("acme", stateless["cron_id"], fired_at)
        assert other["run_id"] == firing_run_id("acme", stateless["cron_id"], fired_at)
        assert run_ids(alice, other["thread_id"]) == [other["run_id"]]

        waiting = cron_of(alice, recent["cron_id"])["last_run"]
        assert waiting["status"] == "pending" and waiting["run_id"] is None and waiting["attempt"] == 1
        assert run_ids(alice, quiet_tid) == []


def test_a_taken_over_firing_whose_run_had_started_is_not_run_again(tmp_path: Path, store: StoreSetup) -> None:
    """A server that started a firing's run and stopped before recording it: the server taking the
    firing over finds that run on its thread (a thread cron's, and a stateless cron's own) and
    records it as the firing's run; no second run starts. A stateless cron that does not keep its
    threads gets the finished run's thread removed, as the stopped server would have."""
    serve = {"cron_poll_s": 0.1, "cron_takeover_s": 1}
    config = store.config(tmp_path, HELLO, loop=LOOP, serve=serve)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        on_thread = client.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)
        kept, removed = (client.crons.create(A, schedule=YEARLY, input=INPUT, on_run_completed="keep") for _ in "12")
        firsts = {}
        for cron in (on_thread, kept, removed):
            make_due(config, "default", cron["cron_id"])
            firsts[cron["cron_id"]] = until(lambda c=cron: finished(client, c["cron_id"]), "the firing's run")
        threads = {t["thread_id"] for t in client.threads.search(limit=100)}
        assert firsts[removed["cron_id"]]["thread_id"] in threads

        book = CronBook(load_settings(config), "default")
        book.update(removed["cron_id"], None, lambda c: c.update(on_run_completed="delete"))  # its server died first
        for cron_id, first in firsts.items():
            assert first["run_id"] == firing_run_id("default", cron_id, first["fired_at"])
            long_ago = iso(datetime.now(UTC) - timedelta(minutes=5)) or ""
            strand(config, "default", cron_id, first["fired_at"], long_ago)
        for cron_id in firsts:
            until(lambda c=cron_id: (cron_of(client, c)["last_run"] or {}).get("run_id"), "the takeover recorded")
        gone = firsts[removed["cron_id"]]["thread_id"]
        until(lambda: gone not in {t["thread_id"] for t in client.threads.search(limit=100)}, "its thread removed")
        time.sleep(SETTLE_S)

        for cron_id, first in firsts.items():
            again = cron_of(client, cron_id)["last_run"]
            assert (again["run_id"], again["fired_at"]) == (first["run_id"], first["fired_at"])
            assert again["status"] == "success"
            if first["thread_id"] != gone:
                assert run_ids(client, first["thread_id"]) == [first["run_id"]]
        assert {t["thread_id"] for t in client.threads.search(limit=100)} == threads - {gone}


CYCLES = size("AGENTRT_CRON_KILLS", sample=5, full=30)
"""Kills of the cron drill (each a new cron on a thread of its own)."""


def _kill_serving(config: Path, cwd: Path, after_s: float) -> None:
    """Start `agentrt serve` and SIGKILL it `after_s` seconds later, wherever it is then."""
    cmd = [sys.executable, "-m", "agent.cli", "serve", "--port", str(free_port()), "--config", str(config)]
    with (cwd / "killed.log").open("ab") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(after_s)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def test_a_server_killed_at_random_instants_neither_loses_nor_repeats_a_firing(
    tmp_path: Path, store: StoreSetup
) -> None:
    """Each cycle: a new cron on a thread of its own is made due, a server starts and is killed
    (SIGKILL) at a random instant of its first seconds (starting, claiming, starting the run,
    running it, done), and another server starts: every firing ends with exactly one run on its
    thread, the one its `last_run` names (the firing's id). The seed is in a failure's message
    (`AGENTRT_CRON_KILL_SEED` replays it)."""
    seed = int(os.environ.get("AGENTRT_CRON_KILL_SEED") or random.randrange(1 << 30))
    try:
        _kill_cycles(tmp_path, store, random.Random(seed))
    except AssertionError as err:
        raise AssertionError(f"{err} (AGENTRT_CRON_KILL_SEED={seed})") from None


def _kill_cycles(tmp_path: Path, store: StoreSetup, rng: random.Random) -> None:
    # A killed server's lease on PostgreSQL stays until its TTL: short, so a takeover waits seconds.
    serve = {"cron_poll_s": 0.05, "cron_takeover_s": 1}
    config = store.config(tmp_path, HELLO, loop=LOOP, serve=serve, persistence={"lease_ttl_s": 3})
    seen: list[str] = []
    made = ("", "")
    for cycle in range(CYCLES):
        with serving(config, tmp_path) as server:  # also the server that settles the previous cycle
            client = get_sync_client(url=server.url)
            if cycle:
                seen.append(_settled(client, *made))
            tid = client.threads.create()["thread_id"]
            made = (tid, client.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)["cron_id"])
        make_due(config, "default", made[1])
        _kill_serving(config, tmp_path, rng.uniform(0.5, 4.0))
    with serving(config, tmp_path) as server:
        seen.append(_settled(get_sync_client(url=server.url), *made))
    assert len(seen) == CYCLES and set(seen) <= {"success", "interrupted"}, seen  # none refused


def _settled(client: SyncLangGraphClient, tid: str, cron_id: str) -> str:
    """Wait until the cron's firing names its run and that run is over; check that run carries the
    firing's id and is the thread's one turn (a turn its killed server had recorded is continued:
    then its first part is listed too, interrupted). The run's status."""
    try:
        last = until(lambda: finished(client, cron_id), f"cron {cron_id}'s firing settled")
    except AssertionError as err:
        raise AssertionError(f"{err}: {cron_of(client, cron_id)['last_run']}, runs {client.runs.list(tid)}") from None
    assert last["run_id"] == firing_run_id("default", cron_id, last["fired_at"]), f"cron {cron_id}: {last}"
    runs = client.runs.list(tid)
    assert [r["run_id"] for r in runs].count(last["run_id"]) == 1, f"cron {cron_id}: {runs}"
    assert len({r["metadata"]["agentrt_run_id"] for r in runs}) == 1, f"cron {cron_id}: {runs}"
    assert all(r["status"] == "interrupted" for r in runs if r["run_id"] != last["run_id"]), runs
    return str(last["status"])


def test_a_taken_over_firing_waits_for_the_lease_its_stopped_server_still_holds(
    tmp_path: Path, store: StoreSetup
) -> None:
    """A server killed after taking its thread's lease for the firing's run, before the run's first
    event, leaves the lease held until its TTL (PostgreSQL, Redis) and no run on the thread: the
    server taking the firing over leaves it pending (no error, no run) while the lease is held,
    and starts the run, once, when it is free."""
    config = store.config(tmp_path, HELLO, loop=LOOP, serve={"cron_poll_s": 0.1, "cron_takeover_s": 1})
    settings = load_settings(config)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        cron_id = client.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)["cron_id"]
        fired_at = iso(datetime.now(UTC) - timedelta(minutes=2)) or ""
        with SessionHold(settings, build_lease(settings), "default", tid):  # the stopped server's lease
            strand(config, "default", cron_id, fired_at, fired_at)
            deadline = time.monotonic() + 3.0  # three takeovers' worth of polls
            while time.monotonic() < deadline:
                last = cron_of(client, cron_id)["last_run"]
                assert (last["status"], last["run_id"], last["error"]) == ("pending", None, None), last
                time.sleep(0.2)
            assert last["attempt"] >= 2  # taken over, and left for later
            assert run_ids(client, tid) == []
        last = until(lambda: finished(client, cron_id), "the firing's run once the lease is free")
        time.sleep(SETTLE_S)
        assert last["status"] == "success" and last["run_id"] == firing_run_id("default", cron_id, fired_at)
        assert run_ids(client, tid) == [last["run_id"]]


def test_a_firing_whose_server_stopped_mid_run_shows_the_run_as_its_thread_lists_it(
    tmp_path: Path, store: StoreSetup
) -> None:
    """A server that stopped while the firing's run ran never recorded the run's end: the cron's
    `last_run` said `running` for good. The next server's poll records the status the thread lists
    for that run; no run starts."""
    config = store.config(tmp_path, HELLO, loop=LOOP, serve={"cron_poll_s": 0.1, "cron_takeover_s": 1})
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        cron_id = client.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)["cron_id"]
        make_due(config, "default", cron_id)
        first = until(lambda: finished(client, cron_id), "the firing's run")
    assert first["status"] == "success"

    def left_running(cron: dict[str, Any]) -> None:
        cron["last_run"]["status"] = "running"

    CronBook(load_settings(config), "default").update(cron_id, None, left_running)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        last = until(lambda: finished(client, cron_id), "the run's status recorded")
        time.sleep(SETTLE_S)
        assert (last["run_id"], last["fired_at"], last["status"]) == (first["run_id"], first["fired_at"], "success")
        assert run_ids(client, tid) == [first["run_id"]]


def test_a_taken_over_firing_whose_turn_was_recorded_continues_that_turn(tmp_path: Path, store: StoreSetup) -> None:
    """A process that recorded the firing's turn and stopped before its run's first event (here
    `agentrt run` killed right after recording its turn, as a server killed there leaves the thread)
    leaves an unfinished turn, no run under the firing's id, and a new turn refused over it: the
    server taking the firing over continues that turn as the firing's run, and the thread ends with
    one turn, answered once."""
    serve = {"cron_poll_s": 0.1, "cron_takeover_s": 1}
    config = store.config(tmp_path, HELLO, loop=LOOP, serve=serve, persistence={"lease_ttl_s": 3})
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        cron_id = client.crons.create_for_thread(tid, A, schedule=YEARLY, input=INPUT)["cron_id"]
        fired_at = iso(datetime.now(UTC) - timedelta(seconds=30)) or ""
        cmd = [sys.executable, "-m", "agent.cli", "run", "--config", str(config), "--session", tid, "report"]
        crashed = subprocess.run(
            cmd, cwd=tmp_path, env={**env(), "AGENTRT_CRASH_AT": "turn_recorded:1"}, capture_output=True, timeout=120
        )
        assert crashed.returncode == 137, crashed.stderr
        strand(config, "default", cron_id, fired_at, fired_at)

        last = until(lambda: finished(client, cron_id), "the firing's run")
        time.sleep(SETTLE_S)
        assert last["status"] == "success" and last["run_id"] == firing_run_id("default", cron_id, fired_at)
        runs = client.runs.list(tid)
        assert [r["run_id"] for r in runs].count(last["run_id"]) == 1
        assert len({r["metadata"]["agentrt_run_id"] for r in runs}) == 1  # one turn: continued, not repeated
        messages = client.threads.get_state(tid)["values"]["messages"]
        assert [m["type"] for m in messages if m["type"] != "system"] == ["human", "ai"], messages
