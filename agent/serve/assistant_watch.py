"""Stopping the runs of an assistant deleted on any server: every `WATCH_S`, each server process
reads the assistants of the tenants whose runs it has in flight (running or pending) with an
assistant of their own, and cancels (`interrupt`) every run whose assistant is no longer there.

The server that deletes an assistant cancels its own runs at once (agent/serve/routes_assistants.py);
the others learn of it from the record store, where every server keeps the tenant's assistants
(agent/session/assistant_doc.py): a running run stops at its next step boundary after the read,
a pending one never starts. A tick reads one document per tenant with such runs, nothing when a
server runs only the built-in assistant.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from starlette.concurrency import run_in_threadpool

from agent.serve.assistants import is_builtin
from agent.serve.run_record import CancelAction, RunRecord
from agent.serve.serve_context import ServeContext

log = logging.getLogger("agentrt.serve")
WATCH_S = 0.5
"""How often the runs in flight are checked against their tenants' assistants."""


def orphans(ctx: ServeContext) -> list[RunRecord]:
    """The runs in flight in this process whose assistant is gone (read now, per tenant)."""
    by_tenant: dict[str, list[RunRecord]] = defaultdict(list)
    for rec in ctx.engine.inflight():
        if not is_builtin(rec.assistant_id) and not rec.cancel_requested.is_set():
            by_tenant[rec.tenant_id].append(rec)
    out: list[RunRecord] = []
    for tenant, recs in by_tenant.items():
        present = {str(a["assistant_id"]) for a in ctx.assistants.all(tenant)}
        out.extend(r for r in recs if r.assistant_id not in present)
    return out


async def watch(ctx: ServeContext, every_s: float = WATCH_S) -> None:
    """Cancel the runs of deleted assistants every `every_s` until cancelled (a failed read is
    logged; the next tick tries again)."""
    while True:
        try:
            for rec in await run_in_threadpool(orphans, ctx):
                log.info("run %s: its assistant %s was deleted; cancelling it", rec.run_id, rec.assistant_id)
                await run_in_threadpool(ctx.engine.cancel, rec, CancelAction.INTERRUPT)
        except Exception as err:
            log.warning("could not check the runs in flight against their assistants: %s", err)
        await asyncio.sleep(every_s)
