"""Cancels that reach this server through the record store: every `WATCH_S`, each server process
looks at its runs in flight (running or pending) and cancels

- a run whose assistant is no longer there (`interrupt`): deleted on any server over the store, which
  keeps the tenant's assistants (agent/session/assistant_doc.py); one document read per tenant
  with runs of an assistant of their own, nothing when only the built-in assistant runs;
- a run another server was asked to cancel (`runs.cancel` sent to a server that does not hold the
  run): that server appends a cancel mark to the thread's run table (agent/serve/run_table.py),
  read here from where the last read ended, one read per thread with runs in flight.

The server that deletes an assistant, or is asked to cancel its own run, cancels at once; here a
running run stops at its next step boundary after the read, a pending one never starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from starlette.concurrency import run_in_threadpool

from agent.serve.assistants import is_builtin
from agent.serve.run_record import CancelAction, RunRecord
from agent.serve.run_table import RunTable
from agent.serve.serve_context import ServeContext

log = logging.getLogger("agentrt.serve")
WATCH_S = 0.5
"""How often the runs in flight are checked against their tenants' assistants and cancel marks."""


def orphans(ctx: ServeContext, inflight: list[RunRecord]) -> list[tuple[RunRecord, CancelAction]]:
    """The runs whose assistant is gone (read now, per tenant)."""
    by_tenant: dict[str, list[RunRecord]] = defaultdict(list)
    for rec in inflight:
        if not is_builtin(rec.assistant_id):
            by_tenant[rec.tenant_id].append(rec)
    out: list[tuple[RunRecord, CancelAction]] = []
    for tenant, recs in by_tenant.items():
        present = {str(a["assistant_id"]) for a in ctx.assistants.all(tenant)}
        out.extend((r, CancelAction.INTERRUPT) for r in recs if r.assistant_id not in present)
    return out


class Marks:
    """Where the last read of each thread's cancel marks ended."""

    def __init__(self) -> None:
        self.read_to: dict[tuple[str, str], int] = {}

    def cancelled(self, ctx: ServeContext, inflight: list[RunRecord]) -> list[tuple[RunRecord, CancelAction]]:
        """The runs a cancel mark names (a thread met for the first time is read whole)."""
        by_thread: dict[tuple[str, str], dict[str, RunRecord]] = defaultdict(dict)
        for rec in inflight:
            by_thread[rec.key][rec.run_id] = rec
        self.read_to = {k: v for k, v in self.read_to.items() if k in by_thread}  # threads no longer here
        out: list[tuple[RunRecord, CancelAction]] = []
        for key, recs in by_thread.items():
            marks, self.read_to[key] = RunTable(ctx.settings, *key).marks(self.read_to.get(key, 0))
            for mark in marks:
                named = recs.get(str(mark.get("run_id")))
                if named is not None:
                    action = CancelAction.ROLLBACK if mark.get("action") == "rollback" else CancelAction.INTERRUPT
                    out.append((named, action))
        return out


def _due(ctx: ServeContext, marks: Marks) -> list[tuple[RunRecord, CancelAction]]:
    inflight = [r for r in ctx.engine.inflight() if not r.cancel_requested.is_set()]
    if not inflight:
        return []
    return [*marks.cancelled(ctx, inflight), *orphans(ctx, inflight)]


async def watch(ctx: ServeContext, every_s: float = WATCH_S) -> None:
    """Apply the cancels the store holds every `every_s` until cancelled (a failed read is logged;
    the next tick tries again)."""
    marks = Marks()
    while True:
        try:
            for rec, action in await run_in_threadpool(_due, ctx, marks):
                log.info("run %s: cancelled through the record store (%s)", rec.run_id, action.value)
                await run_in_threadpool(ctx.engine.cancel, rec, action)
        except Exception as err:
            log.warning("could not read the cancels the record store holds: %s", err)
        await asyncio.sleep(every_s)
