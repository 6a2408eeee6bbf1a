"""What a server does with a cron firing it takes over (`agent.serve.cron_scheduler`).

The firing was claimed by a server that stopped before recording the run it started, somewhere
between the claim and that record. The firing's run id (and a stateless firing's thread id) come
from the cron and the firing's time, so what the stopped server did can be read off the thread:

- the run is listed on its thread (it reached its first event): it is the firing's run, recorded;
- the thread's newest turn is unfinished (`RUNNING`) and began after the firing's time: the stopped
  server's run recorded its turn, then stopped before its first event; a thread's firing continues
  that turn (a new turn is refused over it, and starting again would record the input twice);
- a stateless firing's thread exists without its run: nothing of the turn ran; the thread is
  removed and the run starts afresh (a thread that cannot be removed yet, its lease held until its
  TTL, waits for the next takeover);
- otherwise the run never started: it starts now.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent.core.errors import AgentrtError, SessionNotFound
from agent.core.statuses import RunStatus
from agent.serve.crons import parse
from agent.serve.run_service import runs_of
from agent.serve.serve_context import ServeContext
from agent.serve.thread_ops import delete_thread

log = logging.getLogger("agentrt.serve")
_RUN_START = frozenset({"run_start"})


class Next(StrEnum):
    """What to do with a firing taken over."""

    RECORD = "record"
    """Its run started: record it as the firing's run."""
    START = "start"
    """Its run never started: start it."""
    CONTINUE = "continue"
    """Its run recorded its turn and stopped: continue that turn as the firing's run."""
    LATER = "later"
    """Not yet (the stopped server's lease is still held): the next takeover looks again."""


@dataclass(frozen=True)
class Takeover:
    """What to do, and with `Next.RECORD` the firing's run in its `last_run` form."""

    next: Next
    found: dict[str, Any] | None = None


def take_over(
    ctx: ServeContext, tenant_id: str, thread_id: str, run_id: str, fired_at: str, stateless: bool
) -> Takeover:
    """Read what became of the firing at `fired_at` whose run is `run_id` on `thread_id` (see the
    module docstring); `stateless`: the thread was the firing's own."""
    try:
        runs = runs_of(ctx, tenant_id, thread_id)
        session = ctx.runner.manager.get(tenant_id, thread_id)
    except SessionNotFound:
        return Takeover(Next.START)
    for run in runs:
        if run["run_id"] == run_id:
            found = {"run_id": run_id, "thread_id": thread_id, "status": run["status"], "error": run.get("error")}
            return Takeover(Next.RECORD, found)
    if not stateless:
        return Takeover(Next.CONTINUE if _turn_since(ctx, session, fired_at) else Next.START)
    try:
        delete_thread(ctx, session)
    except SessionNotFound:
        pass
    except AgentrtError as err:
        log.warning("a cron firing's thread %s could not be removed, tried again later: %s", thread_id, err)
        return Takeover(Next.LATER)
    return Takeover(Next.START)


def _turn_since(ctx: ServeContext, session: Any, fired_at: str) -> bool:
    """Whether the session's newest turn is unfinished and began at or after `fired_at`."""
    if session.last_run_status != RunStatus.RUNNING or not session.last_run_id:
        return False
    events = ctx.runner.manager.event_log(session.tenant_id, session.session_id)
    start = events.newest(_RUN_START, {"run_id": session.last_run_id})
    began, fired = parse(start.ts) if start is not None else None, parse(fired_at)
    return began is not None and fired is not None and began >= fired
