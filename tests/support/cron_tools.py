"""Crons in tests: make one due now, without waiting for its minute; leave a firing as a server that
stopped after claiming it leaves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent.core.config import load_settings
from agent.serve.crons import CronBook, iso


def make_due(config: Path, tenant: str, cron_id: str) -> None:
    """Move the cron's next time into the past in the store the servers of `config` read, as if its
    minute had come: the next poll of a server fires it."""
    past = iso(datetime.now(UTC) - timedelta(seconds=1))
    CronBook(load_settings(config), tenant).update(cron_id, None, lambda c: c.update(next_run_date=past))


def strand(config: Path, tenant: str, cron_id: str, fired_at: str, claimed_at: str) -> None:
    """Leave the cron's firing at `fired_at` as a server that claimed it at `claimed_at` and then
    stopped, before recording the run it started (or before starting it), leaves it."""

    def stranded(cron: dict[str, Any]) -> None:
        cron["last_run"] = {
            "run_id": None,
            "thread_id": cron["thread_id"],
            "status": "pending",
            "error": None,
            "fired_at": fired_at,
            "claimed_at": claimed_at,
            "attempt": 1,
        }

    CronBook(load_settings(config), tenant).update(cron_id, None, stranded)
