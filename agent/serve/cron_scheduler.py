"""The cron scheduler of `agentrt serve`: every `serve.cron_poll_s`, the crons that are due start their run.

Each server process runs one. A tick reads the tenants that keep crons, claims the due firings of
each by compare-and-swap (`CronBook.claim_due`: of several servers over one store, one wins each
firing) and starts each claimed firing as a normal run, through the run service: in this process
or on the Celery workers (`serve.runs_on`). The cron's `last_run` then names the run and, once it
is over, its status and error. A server that stops between its claim and the start of the run
loses that one firing (the next one comes at the next time of the schedule).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool

from agent.core.errors import AgentrtError
from agent.serve.auth import Principal
from agent.serve.crons import Cron, CronBook, iso, utcnow
from agent.serve.run_record import RunRecord
from agent.serve.run_service import background, start
from agent.serve.serve_context import ServeContext
from agent.session.cron_doc import cron_tenants

log = logging.getLogger("agentrt.serve")
CRON_METADATA_KEY = "cron_id"
"""Run metadata: the cron that started the run."""


class CronScheduler:
    """Fires the due crons of every tenant of the server's store (see the module docstring)."""

    def __init__(self, ctx: ServeContext, poll_s: float) -> None:
        self.ctx = ctx
        self.poll_s = poll_s

    async def run(self) -> None:
        """Tick every `poll_s` until cancelled (a failed tick is logged; the next one tries again)."""
        while True:
            try:
                await self.tick()
            except Exception as err:
                log.warning("the cron scheduler could not fire the due crons: %s", err)
            await asyncio.sleep(self.poll_s)

    async def tick(self, now: datetime | None = None) -> list[RunRecord]:
        """Claim and start every firing due at `now` (default: the current time); the runs started."""
        now = now or utcnow()
        started = []
        for tenant in await run_in_threadpool(cron_tenants, self.ctx.settings):
            book = CronBook(self.ctx.settings, tenant)
            try:
                claimed = await run_in_threadpool(book.claim_due, now)
            except Exception as err:  # one tenant's unreadable crons do not hold back the others'
                log.warning("could not claim the due crons of tenant %s: %s", tenant, err)
                continue
            for cron in claimed:
                rec = await self.fire(book, cron, iso(now))
                if rec is not None:
                    started.append(rec)
        return started

    async def fire(self, book: CronBook, cron: Cron, fired_at: str | None) -> RunRecord | None:
        """Start the cron's run; its outcome is kept as the cron's `last_run` (a run refused at the
        start, e.g. its thread is gone or busy, as an `error` with the reason)."""
        principal = Principal(book.tenant_id, cron.get("user_id"))
        body = run_body(cron)
        try:
            rec = await start(self.ctx, principal, cron.get("thread_id"), body)
        except AgentrtError as err:
            log.warning("cron %s could not start its run: %s", cron["cron_id"], err)
            failed = {"run_id": None, "thread_id": cron.get("thread_id"), "status": "error", "error": _error(err)}
            await run_in_threadpool(book.record_run, cron["cron_id"], fired_at, failed)
            return None
        await run_in_threadpool(book.record_run, cron["cron_id"], fired_at, outcome(rec))
        background(_follow(book, cron["cron_id"], fired_at, rec))
        return rec


def run_body(cron: Cron) -> dict[str, Any]:
    """The body of the run a firing starts: the cron's payload, its metadata naming the cron."""
    body = dict(cron.get("payload") or {})
    body["assistant_id"] = cron["assistant_id"]
    body["metadata"] = {**(body.get("metadata") or {}), CRON_METADATA_KEY: cron["cron_id"]}
    if cron.get("thread_id") is None:
        body["on_completion"] = cron.get("on_run_completed") or "delete"
    return body


def outcome(rec: RunRecord) -> dict[str, Any]:
    """A cron's `last_run` from its run."""
    return {"run_id": rec.run_id, "thread_id": rec.thread_id, "status": rec.status.value, "error": rec.error}


async def _follow(book: CronBook, cron_id: str, fired_at: str | None, rec: RunRecord) -> None:
    await rec.wait()
    with contextlib.suppress(Exception):  # the run is over either way; only the cron's view lags
        await run_in_threadpool(book.record_run, cron_id, fired_at, outcome(rec))


def _error(err: Exception) -> dict[str, str]:
    return {"error": type(err).__name__, "message": str(err)}
