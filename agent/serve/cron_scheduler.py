"""The cron scheduler of `agentrt serve`: every `serve.cron_poll_s`, the crons that are due start their run.

Each server process runs one. A tick reads the tenants that keep crons, claims the due firings of
each by compare-and-swap (`CronBook.claim_due`: of several servers over one store, one wins each
firing) and starts each claimed firing as a normal run, through the run service: in this process
or on the Celery workers (`serve.runs_on`). The cron's `last_run` then names the run and, once it
is over, its status and error.

A server that stops between its claim and recording the run it started leaves the firing
`pending` with no run: `serve.cron_takeover_s` after the claim, the next tick of any server claims
it again (`CronBook.claim_due`) and goes on from where the stopped server was
(`agent.serve.cron_takeover`): each firing runs once, unless its first server took longer than
`cron_takeover_s` to start it. A firing whose run's end its server did not record (it stopped
while the run ran) gets the status its thread lists for the run (`cron_takeover.settle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool

from agent.core.errors import AgentrtError, LeaseHeld
from agent.serve.auth import Principal
from agent.serve.cron_takeover import Next, remove_when_over, settle, take_over
from agent.serve.crons import Cron, CronBook, firing_run_id, firing_thread_id, utcnow
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
        self.takeover_s = ctx.settings.serve.cron_takeover_s

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
                seen = await run_in_threadpool(book.all)
                claimed = await run_in_threadpool(book.claim_due, now, self.takeover_s, seen)
            except Exception as err:  # one tenant's unreadable crons do not hold back the others'
                log.warning("could not claim the due crons of tenant %s: %s", tenant, err)
                continue
            for cron in claimed:
                rec = await self.fire(book, cron)
                if rec is not None:
                    started.append(rec)
            try:  # a firing recorded since `seen` was read is not overwritten: `record_run` checks its time
                await run_in_threadpool(settle, self.ctx, book, now, self.takeover_s, seen)
            except Exception as err:
                log.warning("could not bring the crons of tenant %s up to date: %s", tenant, err)
        return started

    async def fire(self, book: CronBook, cron: Cron) -> RunRecord | None:
        """Start the run of the cron's claimed firing (its `last_run`); its outcome is kept as the
        cron's `last_run` (a run refused at the start, e.g. its thread is gone or busy, as an `error`
        with the reason). A firing taken over goes as `agent.serve.cron_takeover` reads it; one whose
        thread's lease is held (by the server that stopped, until its TTL) waits for the next takeover."""
        principal = Principal(book.tenant_id, cron.get("user_id"))
        body = run_body(cron)
        fired_at = cron["last_run"]["fired_at"]
        run_id = firing_run_id(book.tenant_id, cron["cron_id"], fired_at)
        thread_id: str | None = cron.get("thread_id")
        own_thread = firing_thread_id(book.tenant_id, cron["cron_id"], fired_at)
        new_thread = own_thread if thread_id is None else None
        takeover = int(cron["last_run"].get("attempt") or 1) > 1
        if takeover:
            target = own_thread if thread_id is None else thread_id
            what = await run_in_threadpool(
                take_over, self.ctx, book.tenant_id, target, run_id, fired_at, thread_id is None
            )
            log.info("cron %s: its firing at %s, taken over: %s", cron["cron_id"], fired_at, what.next)
            if what.found is not None:
                await run_in_threadpool(book.record_run, cron["cron_id"], fired_at, what.found)
                await run_in_threadpool(remove_when_over, self.ctx, book.tenant_id, cron, what.found)
            if what.next in (Next.RECORD, Next.LATER):
                return None
            if what.next is Next.CONTINUE:
                body = {**body, "input": None}
        try:
            rec = await start(self.ctx, principal, thread_id, body, run_id=run_id, new_thread_id=new_thread)
        except LeaseHeld as err:
            if not takeover:
                await self._refused(book, cron, fired_at, err)
            # Else likely the lease of the server that stopped (held until its TTL): the next takeover retries.
            return None
        except AgentrtError as err:
            await self._refused(book, cron, fired_at, err)
            return None
        await run_in_threadpool(book.record_run, cron["cron_id"], fired_at, outcome(rec))
        background(_follow(book, cron["cron_id"], fired_at, rec))
        return rec

    async def _refused(self, book: CronBook, cron: Cron, fired_at: str, err: AgentrtError) -> None:
        """Keep why the firing's run could not start as its `last_run` (an `error`, no run)."""
        log.warning("cron %s could not start its run: %s", cron["cron_id"], err)
        failed = {"run_id": None, "thread_id": cron.get("thread_id"), "status": "error", "error": _error(err)}
        await run_in_threadpool(book.record_run, cron["cron_id"], fired_at, failed)


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
