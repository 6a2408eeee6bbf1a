"""Following a thread: the server-sent events of every run on it, run after run, with an end mark
per run, and the thread's state edits, as one stream that lasts until the client goes away
(`threads.join_stream` and the thread-stream protocol read it).

Runs are found by looking at the engine's runs of the thread every `POLL_S`, so a run started by any
route (or queued behind another) is picked up, and at the thread's run table every `REMOTE_POLL_S`,
so a run another server process over the same store holds is too (its events read from the store:
agent/serve/remote_runs.py); state edits made here are announced by `announce_state`.
Runs are followed at once (a pending run simply sends nothing until it starts); a thread runs one
run at a time, so the events of two runs never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent.serve.auth import Principal
from agent.serve.remote_runs import RemoteRows, follow_remote, in_flight, shadow
from agent.serve.run_record import RunRecord
from agent.serve.serve_context import ServeContext

log = logging.getLogger("agentrt.serve")
POLL_S = 0.1
"""How often the engine is asked for new runs of the thread."""


class Start(StrEnum):
    """Where a follower starts in the runs the thread already has."""

    LIVE = "live"
    """Only what happens from now: a running run from its next event, a pending run whole."""
    HISTORY = "history"
    """Every run this process still holds in full, each from its first event."""


@dataclass(frozen=True)
class ThreadItem:
    """One thing that happened on the thread."""

    run: RunRecord | None
    """The run it belongs to (None: a state edit)."""
    event_id: int
    """The event's id in its run (its end mark: one past its last event)."""
    name: str
    """The server-sent event's name; `END` for a run's end, `STATE_UPDATE` for a state edit."""
    data: Any


END = "run_done"
STATE_UPDATE = "state_update"

_listeners: dict[tuple[str, str], set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[ThreadItem]]]] = {}
_listeners_lock = threading.Lock()


def announce_state(ctx: ServeContext, principal: Principal, thread_id: str) -> None:
    """Tell the thread's followers its state was edited, with the state it now has (read only when
    someone follows; callable from any thread)."""
    with _listeners_lock:
        targets = list(_listeners.get((principal.tenant_id, thread_id), ()))
    if not targets:
        return
    state = ctx.state(ctx.session(principal, thread_id))
    item = ThreadItem(None, 0, STATE_UPDATE, {"state": state, "thread_id": thread_id})
    for loop, queue in targets:
        with contextlib.suppress(RuntimeError):  # that follower's loop is gone
            loop.call_soon_threadsafe(queue.put_nowait, item)


async def _pump_remote(ctx: ServeContext, rec: RunRecord, after: int | None, queue: asyncio.Queue[ThreadItem]) -> None:
    """A run another server holds, read from the record store (agent/serve/remote_runs.py)."""
    async for event_id, name, data in follow_remote(ctx.settings, rec, after):
        if name is None:
            await queue.put(ThreadItem(rec, event_id, END, {"status": END, "run_id": rec.run_id}))
            return
        await queue.put(ThreadItem(rec, event_id, name, data))


async def _pump(rec: RunRecord, after: int, queue: asyncio.Queue[ThreadItem]) -> None:
    last = after
    async for item in rec.follow_streamed(after):
        if item is not None:
            last = item[0]
            await queue.put(ThreadItem(rec, *item))
    total = len(rec.streamed)
    if after <= total and not rec.trimmed:
        await queue.put(ThreadItem(rec, max(last, total) + 1, END, {"status": END, "run_id": rec.run_id}))


class ThreadFollower:
    """Follows one thread for one client. Where it starts is fixed when it is made (the route makes
    it before answering, so "now" is when the request was accepted)."""

    def __init__(
        self,
        ctx: ServeContext,
        tenant_id: str,
        thread_id: str,
        start: Start = Start.LIVE,
        resume: tuple[str, int] | None = None,
        replay_finished: Callable[[RunRecord], bool] | None = None,
    ) -> None:
        """`replay_finished`: with `Start.HISTORY`, which finished runs to replay (all without it;
        asked of every run the follower meets, in flight or found later too)."""
        self.ctx, self.key, self.replay_finished = ctx, (tenant_id, thread_id), replay_finished
        self.start = start
        self.remote = RemoteRows(ctx.settings, tenant_id, thread_id)
        self.seen: set[str] = set()
        self.starts: list[tuple[RunRecord, int]] = []
        held = list(reversed(ctx.engine.for_thread(tenant_id, thread_id)))  # oldest first
        ids = [r.run_id for r in held]
        resumed = ids.index(resume[0]) if resume is not None and resume[0] in ids else None
        for n, rec in enumerate(held):
            self.seen.add(rec.run_id)
            if resumed is not None and resume is not None:
                if n >= resumed:
                    self.starts.append((rec, resume[1] if n == resumed else 0))
            elif start is Start.HISTORY and not rec.trimmed:
                wanted = replay_finished is None or replay_finished(rec)  # asked of every run
                if wanted or not rec.done.is_set():
                    self.starts.append((rec, 0))
            elif not (rec.done.is_set() or rec.trimmed):
                self.starts.append((rec, len(rec.streamed)))

    async def items(self, heartbeat_s: float | None = None) -> AsyncIterator[ThreadItem | None]:
        """The thread's items as they come (None: `heartbeat_s` passed without one)."""
        queue: asyncio.Queue[ThreadItem] = asyncio.Queue()
        listener = (asyncio.get_running_loop(), queue)
        tasks = [asyncio.create_task(_pump(rec, after, queue)) for rec, after in self.starts]
        with _listeners_lock:
            _listeners.setdefault(self.key, set()).add(listener)
        try:
            tasks += await self._remote(queue, first=True)
            quiet = 0.0
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), POLL_S)
                except TimeoutError:
                    for rec in reversed(self.ctx.engine.for_thread(*self.key)):
                        if rec.run_id not in self.seen:
                            self.seen.add(rec.run_id)
                            if self.replay_finished is not None:
                                self.replay_finished(rec)  # it is followed whole: told so
                            tasks.append(asyncio.create_task(_pump(rec, 0, queue)))
                    if self.remote.due():
                        tasks += await self._remote(queue)
                    quiet += POLL_S
                    if heartbeat_s is not None and quiet >= heartbeat_s:
                        quiet = 0.0
                        yield None
                    continue
                quiet = 0.0
                yield item
        finally:
            with _listeners_lock:
                listeners = _listeners.get(self.key)
                if listeners is not None:
                    listeners.discard(listener)
                    if not listeners:
                        del _listeners[self.key]
            for task in tasks:
                task.cancel()

    async def _remote(self, queue: asyncio.Queue[ThreadItem], first: bool = False) -> list[asyncio.Task[None]]:
        """Follow the runs of other servers new in the run table. The first read finds those already
        there: one in flight is followed from its start (`Start.HISTORY`) or from now; one over is
        not replayed (this server replays only the runs it holds). Any found later is followed whole."""
        try:
            rows = await asyncio.to_thread(self.remote.poll)
        except Exception as err:  # the store is unreadable now: the next poll tries again
            log.warning("could not read the runs of thread %s other servers hold: %s", self.key[1], err)
            return []
        tasks = []
        for row in rows:
            run_id = str(row.get("run_id"))
            if run_id in self.seen or self.ctx.engine.get(self.key[0], run_id) is not None:
                continue
            if first and not in_flight(row):
                continue
            self.seen.add(run_id)
            rec = shadow(row, self.key[0])
            if self.replay_finished is not None:
                self.replay_finished(rec)  # followed from where it is: told so
            after = None if first and self.start is Start.LIVE else 0
            tasks.append(asyncio.create_task(_pump_remote(self.ctx, rec, after, queue)))
        return tasks
