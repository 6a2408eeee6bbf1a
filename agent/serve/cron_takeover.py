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

A run found over gets the thread of a stateless firing removed, unless its cron keeps them, as the
stopped server would have. And a firing whose server stopped while its run ran (the cron's
`last_run` says `running` for good) gets the status the thread lists for the run (`settle`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from agent.core.errors import AgentrtError, SessionNotFound
from agent.core.statuses import RunStatus
from agent.serve.crons import Cron, CronBook, parse, run_over
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


def settle(ctx: ServeContext, book: CronBook, now: datetime, after_s: float, seen: list[Cron] | None = None) -> None:
    """Record the status of firings' runs whose end their server did not record (it stopped while
    the run was running: the thread lists the run as over, `interrupted`). A run this process holds
    is left to it; one still running elsewhere is left as it is. `seen`: the crons as just read."""
    for cron in book.unsettled(now, after_s, seen):
        last = cron["last_run"]
        if ctx.engine.get(book.tenant_id, last["run_id"]) is not None:
            continue
        try:
            runs = runs_of(ctx, book.tenant_id, last["thread_id"])
        except SessionNotFound:
            continue
        for run in runs:
            if run["run_id"] == last["run_id"] and run["status"] != last["status"]:
                now_is = {**last, "status": run["status"], "error": run.get("error")}
                book.record_run(cron["cron_id"], last["fired_at"], now_is)
                remove_when_over(ctx, book.tenant_id, cron, now_is)


def remove_when_over(ctx: ServeContext, tenant_id: str, cron: Cron, run: dict[str, Any]) -> None:
    """Remove the thread of a stateless cron's firing once its run (`run`, in `last_run` form) is
    over, unless the cron keeps them (a thread that cannot be removed now stays, listed)."""
    if cron.get("thread_id") is not None or cron.get("on_run_completed") == "keep" or not run_over(run["status"]):
        return
    try:
        delete_thread(ctx, ctx.runner.manager.get(tenant_id, run["thread_id"]))
    except SessionNotFound:
        return
    except AgentrtError as err:
        log.warning("the thread %s of a stateless cron's run could not be removed: %s", run["thread_id"], err)
