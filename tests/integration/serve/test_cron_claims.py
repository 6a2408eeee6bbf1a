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

    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_claim_in_child, args=(str(config), barrier, out)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    claims = [out.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * PROCESSES

    every = [cid for claimed in claims for cid in claimed]
    assert sorted(every) == sorted(made)  # each firing once, none lost
    for cron in book.all():
        assert parse(cron["next_run_date"]) > datetime.now(UTC) - timedelta(seconds=5)
        assert cron["last_run"]["status"] == "pending"
    assert book.claim_due(datetime.now(UTC)) == []  # nothing is due twice
