"""The threads of an assistant, which `assistants.delete(assistant_id, delete_threads=True)` deletes
with it, as LangGraph's server deletes the threads whose `metadata.assistant_id` names the assistant
(there: the assistant of the thread's newest run).

Here a thread belongs to an assistant when its newest run ran it, read from each thread's run table
(agent/serve/run_table.py) thread by thread: the request takes longer the more threads the tenant
has. Only the caller's threads are found (a user's own, under per-user auth). Each goes as
`threads.delete` deletes it; one still held by a run of another server once `HELD_WAIT_S` passed
is left, and logged.
"""

from __future__ import annotations

import logging

from starlette.concurrency import run_in_threadpool

from agent.core.errors import LeaseHeld, SessionNotFound
from agent.serve.auth import Principal
from agent.serve.run_table import RunTable
from agent.serve.serve_context import ServeContext
from agent.serve.thread_ops import remove_thread
from checkpointing.session_index import RowFilter

log = logging.getLogger("agentrt.serve")
PAGE = 500
HELD_WAIT_S = 30.0
"""How long a thread whose run is stopping is waited for before it is left."""


def _rows(ctx: ServeContext, principal: Principal, where: RowFilter) -> list[str]:
    """The ids of every session of the caller matching `where`, page by page."""
    out: list[str] = []
    while True:
        page = ctx.runner.manager.search(principal.tenant_id, where, order="created", limit=PAGE, offset=len(out))
        assert isinstance(page, list)
        out.extend(row.session_id for row in page)
        if len(page) < PAGE:
            return out


def assistant_threads(ctx: ServeContext, principal: Principal, assistant_id: str) -> list[str]:
    """The caller's threads whose newest run ran the assistant (see the module docstring)."""
    out = []
    for sid in _rows(ctx, principal, RowFilter(user_id=principal.user_id)):
        rows = RunTable(ctx.settings, principal.tenant_id, sid).read().rows.values()
        newest = max(rows, key=lambda r: str(r.get("created_at") or ""), default=None)
        if newest is not None and str(newest.get("assistant_id")) == assistant_id:
            out.append(sid)
    return out


async def delete_assistant_threads(ctx: ServeContext, principal: Principal, assistant_id: str) -> int:
    """Delete the caller's threads of the assistant (its runs already cancelled); how many went."""
    gone = 0
    for thread_id in await run_in_threadpool(assistant_threads, ctx, principal, assistant_id):
        try:
            await remove_thread(ctx, principal, thread_id, HELD_WAIT_S)
            gone += 1
        except SessionNotFound:
            continue
        except LeaseHeld as err:
            log.warning("assistant %s deleted; its thread %s is left: %s", assistant_id, thread_id, err)
    return gone
