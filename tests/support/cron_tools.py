"""Crons in tests: make one due now, without waiting for its minute."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.core.config import load_settings
from agent.serve.crons import CronBook, iso


def make_due(config: Path, tenant: str, cron_id: str) -> None:
    """Move the cron's next time into the past in the store the servers of `config` read, as if its
    minute had come: the next poll of a server fires it."""
    past = iso(datetime.now(UTC) - timedelta(seconds=1))
    CronBook(load_settings(config), tenant).update(cron_id, None, lambda c: c.update(next_run_date=past))
