"""A cron's firing is claimed once across processes: three processes claiming the same due crons
at once (as three servers over one store do) claim each firing exactly once, on the files store
and on PostgreSQL; a claimed cron's next time is its next one after now."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent.core.config import load_settings
from agent.serve.crons import CronBook, iso, new_cron, parse
from agent.session.cron_doc import cron_tenants
from tests.support.store_configs import StoreSetup

CRONS = 12
PROCESSES = 3


def _claim_in_child(config: str, barrier: Any, out: Any) -> None:
    book = CronBook(load_settings(Path(config)), "acme")
    barrier.wait(timeout=120)
    claimed = []
    for _ in range(CRONS):  # one claim a cron at a time: the swaps of the processes interleave
        claimed += [c["cron_id"] for c in book.claim_due(datetime.now(UTC))]
    out.put(claimed)


def _claim_in_processes(config: Path) -> list[list[str]]:
    """What each of `PROCESSES` processes claimed, claiming at once (each exits cleanly)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_claim_in_child, args=(str(config), barrier, out)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    claims = [out.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    return claims


def test_each_due_firing_is_claimed_by_exactly_one_process(tmp_path: Path, store: StoreSetup) -> None:
    config = store.config(tmp_path)
    settings = load_settings(config)
    book = CronBook(settings, "acme")
    now = datetime.now(UTC)
    made = []
    for i in range(CRONS):
        cron = new_cron(
            assistant_id="agentrt",
            thread_id=None,
            user_id=None,
            schedule="*/5 * * * *" if i % 2 else "0 0 1 1 *",
            payload={"input": {"user_input": "hi"}},
            end_time=None,
            enabled=True,
            on_run_completed="delete",
            now=now,
        )
        cron["next_run_date"] = iso(now - timedelta(minutes=1))
        made.append(book.add(cron)["cron_id"])
    assert cron_tenants(settings) == ["acme"]

    claims = _claim_in_processes(config)

    every = [cid for claimed in claims for cid in claimed]
    assert sorted(every) == sorted(made)  # each firing once, none lost
    for cron in book.all():
        assert parse(cron["next_run_date"]) > datetime.now(UTC) - timedelta(seconds=5)
        assert cron["last_run"]["status"] == "pending"
    assert book.claim_due(datetime.now(UTC)) == []  # nothing is due twice


def test_each_stranded_firing_is_taken_over_by_exactly_one_process(tmp_path: Path, store: StoreSetup) -> None:
    """Firings claimed two minutes ago by a server that recorded no run (it stopped): three
    processes claiming at once take each over exactly once, keeping its `fired_at` and counting a
    second attempt; a disabled cron's firing and one claimed just now are left alone; a cron due
    again meanwhile gets a new firing instead of the old one (one run, not one per missed time)."""
    config = store.config(tmp_path)
    book = CronBook(load_settings(config), "acme")
    now = datetime.now(UTC)
    old, recent = iso(now - timedelta(minutes=2)), iso(now)
    made, kinds = [], {}
    for i in range(CRONS):
        cron = new_cron(
            assistant_id="agentrt",
            thread_id=None,
            user_id=None,
            schedule="0 0 1 1 *",
            payload={"input": {"user_input": "hi"}},
            end_time=None,
            enabled=i % 4 != 1,
            on_run_completed="delete",
            now=now,
        )
        kind = ("stranded", "disabled", "recent", "due again")[i % 4]
        claimed = recent if kind == "recent" else old
        cron["last_run"] = {"run_id": None, "thread_id": None, "status": "pending", "error": None}
        cron["last_run"].update(fired_at=claimed, claimed_at=claimed, attempt=1)
        if kind == "due again":
            cron["next_run_date"] = iso(now - timedelta(seconds=30))
        kinds[book.add(cron)["cron_id"]] = kind
        made.append(cron["cron_id"])

    claims = _claim_in_processes(config)

    every = sorted(cid for claimed in claims for cid in claimed)
    assert every == sorted(cid for cid, kind in kinds.items() if kind in ("stranded", "due again"))
    for cron in book.all():
        last, kind = cron["last_run"], kinds[cron["cron_id"]]
        assert last["status"] == "pending" and last["run_id"] is None
        if kind == "stranded":
            assert last["fired_at"] == old and last["attempt"] == 2 and parse(last["claimed_at"]) > now
        elif kind == "due again":
            assert parse(last["fired_at"]) > now and last["attempt"] == 1
        else:
            assert last["attempt"] == 1 and last["claimed_at"] == (recent if kind == "recent" else old)
    assert book.claim_due(datetime.now(UTC)) == []  # nothing is taken over twice
