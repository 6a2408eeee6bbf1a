"""Runs of the server: one run per thread at a time, the others queued in order, each on a thread of a
bounded pool. Each run goes through the AgentRunner (or, with `serve.runs_on` naming the workers, a
pool thread follows the turn a Celery worker runs: agent/serve/workers.py); both yield the same
`RunEvent`s, kept by the run's `RunRecord` (agent/serve/run_record.py); agent/serve/run_on_pool.py runs
one to its end.

A new run on a thread with runs in flight (running or pending) follows its `multitask_strategy`, as
LangGraph's server does: `reject` refuses it (409), `enqueue` queues it behind them, `interrupt`
cancels them (the running one stops after its current step, status `interrupted`; pending ones
never start) and then runs, `rollback` cancels them and rolls the running one back (its writes gone
from the thread, the run no longer listed: agent/serve/rollback.py). The next run starts only once
the one before has let go of the session (its lease released), so a session never has two.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agent.core.errors import SessionError
from agent.runner.agent_runner import AgentRunner
from agent.serve.run_on_pool import RunExecutor
from agent.serve.run_record import ApiRunStatus, CancelAction, Job, RunRecord, Strategy

log = logging.getLogger("agentrt.serve")
KEEP_FINISHED_RUNS = 500
KEEP_EVENTS_OF = 50


class ThreadBusy(SessionError):
    """A run is already going on this thread (HTTP 409)."""


@dataclass
class _Thread:
    """The runs of one thread in this process: the one running and those waiting, soonest first."""

    active: RunRecord | None = None
    pending: list[RunRecord] = field(default_factory=list)
    wake_at: float | None = None

    def inflight(self) -> list[RunRecord]:
        return ([self.active] if self.active is not None else []) + list(self.pending)


class RunEngine:
    """Starts runs on a thread pool, one per thread at a time, and keeps their records."""

    def __init__(
        self,
        runner: AgentRunner,
        threads: int,
        rollback: Callable[[RunRecord], bool] | None = None,
        on_workers: bool = False,
    ) -> None:
        self.runner = runner
        self._exec = RunExecutor(runner, rollback, self._unlist, on_workers)
        self.table = self._exec.table
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="agentrt-serve-run")
        self._lock = threading.Lock()
        self._threads: dict[tuple[str, str], _Thread] = {}
        self._runs: OrderedDict[tuple[str, str], RunRecord] = OrderedDict()
        self._untrimmed: OrderedDict[tuple[str, str], RunRecord] = OrderedDict()
        """The runs of `_runs` not trimmed yet (in flight, or among the newest finished), in its order:
        keeping a run costs the same whether the process has served ten runs or thousands."""
        self._starts: dict[str, Callable[[BaseException | None], None]] = {}
        self._timers: list[threading.Timer] = []
        self._closed = False

    # --- submitting ------------------------------------------------------------------------------------
    async def submit(self, rec: RunRecord, job: Job, strategy: Strategy = Strategy.REJECT) -> RunRecord:
        """Run `job` as `rec` on its thread, by `strategy` when the thread has runs in flight.

        A run that can start now returns once it has started, or raises why it could not (nothing
        of it is kept then); a queued one returns at once, pending (a refusal at its start becomes
        its error). Waiting costs no thread.
        """
        rec.job, rec.strategy = job, strategy
        loop = asyncio.get_running_loop()
        started: asyncio.Future[BaseException | None] = loop.create_future()

        def resolve(err: BaseException | None) -> None:
            if not started.done():
                started.set_result(err)

        with self._lock:
            queued = self._check(rec, strategy) or rec.due > time.time()
        if queued:  # in the table before anything can start it
            await asyncio.to_thread(self.table(rec).put, rec.row())
        with self._lock:
            inflight = self._check(rec, strategy)
            runs = self._threads.setdefault(rec.key, _Thread())
            stopped = self._supersede(runs, rec, strategy) if inflight else []
            superseded = runs.active if rec.supersedes else None
            immediate = not inflight and rec.due <= time.time()
            if immediate:
                self._starts[rec.run_id] = lambda err: _call_soon(loop, resolve, err)
            runs.pending.append(rec)
            runs.pending.sort(key=lambda r: r.due)
            self._remember(rec)
        if superseded is not None:
            await asyncio.to_thread(_relay, superseded)
        for old in stopped:
            await asyncio.to_thread(self._drop_pending, old)
        self._pump(rec.key)
        if not immediate:
            return rec
        failure = await started
        if failure is not None:
            self._unlist(rec)
            raise failure
        return rec

    def _check(self, rec: RunRecord, strategy: Strategy) -> bool:
        """Whether the thread has runs in flight; `ThreadBusy` when they refuse `rec`. Under the lock."""
        runs = self._threads.get(rec.key)
        inflight = runs.inflight() if runs is not None else []
        if inflight and strategy is Strategy.REJECT:
            busy = inflight[0]
            raise ThreadBusy(
                f"thread {rec.thread_id} already has a run in flight ({busy.run_id}, {busy.status.value}); "
                "join it or cancel it first, or send multitask_strategy enqueue, interrupt or rollback"
            )
        return bool(inflight)

    def _supersede(self, runs: _Thread, rec: RunRecord, strategy: Strategy) -> list[RunRecord]:
        """Cancel the thread's runs in flight for `rec` (interrupt / rollback); returns the pending
        ones taken off the queue. Called under the lock."""
        if strategy is Strategy.ENQUEUE:
            return []
        action = CancelAction.ROLLBACK if strategy is Strategy.ROLLBACK else CancelAction.INTERRUPT
        if runs.active is not None:
            rec.supersedes = True
            self._cancel_active(runs.active, action, clean=rec.has_input and action is CancelAction.INTERRUPT)
        stopped, runs.pending = runs.pending, []
        for old in stopped:
            old.cancel_action = action
        return stopped

    @staticmethod
    def _cancel_active(rec: RunRecord, action: CancelAction, clean: bool = False) -> None:
        if rec.cancel_action is not CancelAction.ROLLBACK:  # a rollback asked for stays one
            rec.cancel_action = action
        rec.stop_clean = rec.stop_clean or clean
        rec.cancel_requested.set()

    def _drop_pending(self, rec: RunRecord) -> None:
        """A pending run cancelled: never started; interrupted, or gone with a rollback."""
        rec.cancel_requested.set()
        waiting = self._starts.pop(rec.run_id, None)
        if waiting is not None:  # its request gets the run as it is now: cancelled
            waiting(None)
        table = self.table(rec)
        if rec.cancel_action is CancelAction.ROLLBACK:
            rec.deleted = True
            rec.error = {"error": "RunRolledBack", "message": f"run {rec.run_id} was rolled back before it started"}
            self._unlist(rec)
            table.delete(rec.row())
            rec.finish(ApiRunStatus.ERROR)
            return
        rec.status = ApiRunStatus.INTERRUPTED
        table.put(rec.row())
        rec.finish(ApiRunStatus.INTERRUPTED)

    def cancel(self, rec: RunRecord, action: CancelAction) -> None:
        """Cancel a run: a pending one never starts, a running one stops after its current step
        (and, with `rollback`, its writes are rolled back)."""
        with self._lock:
            runs = self._threads.get(rec.key)
            if runs is None or rec.done.is_set():
                return
            running = runs.active is rec
            if running:
                self._cancel_active(rec, action)
            elif rec in runs.pending:
                runs.pending.remove(rec)
                rec.cancel_action = action
            else:
                return
        if running:
            _relay(rec)
            return
        self._drop_pending(rec)
        self._pump(rec.key)

    def forget(self, tenant_id: str, thread_id: str) -> None:
        """The thread is being deleted: its pending runs never start (its run table goes with it)."""
        with self._lock:
            runs = self._threads.get((tenant_id, thread_id))
            dropped = runs.pending if runs is not None else []
            if runs is not None:
                runs.pending = []
        for rec in dropped:
            rec.cancel_requested.set()
            waiting = self._starts.pop(rec.run_id, None)
            if waiting is not None:
                waiting(None)
            rec.finish(ApiRunStatus.INTERRUPTED)

    def _unlist(self, rec: RunRecord) -> None:
        with self._lock:
            self._runs.pop((rec.tenant_id, rec.run_id), None)
            self._untrimmed.pop((rec.tenant_id, rec.run_id), None)

    def _remember(self, rec: RunRecord) -> None:
        """Keep the record (under the lock); old finished ones drop their buffers, then themselves."""
        key = (rec.tenant_id, rec.run_id)
        self._runs[key] = rec
        self._runs.move_to_end(key)
        self._untrimmed[key] = rec
        self._untrimmed.move_to_end(key)
        finished = [k for k, r in self._untrimmed.items() if r.done.is_set()]
        for k in finished[: max(0, len(finished) - KEEP_EVENTS_OF)]:
            # their subscribers are gone; keep the record, drop what only a run in flight needs
            # (replays read the store)
            self._untrimmed.pop(k).trim()
        # A run not finished is never trimmed: the others are finished, the oldest go first.
        unfinished = len(self._untrimmed) - min(len(finished), KEEP_EVENTS_OF)
        excess = len(self._runs) - unfinished - KEEP_FINISHED_RUNS
        if excess > 0:
            old = [k for k, r in itertools.islice(self._runs.items(), excess + unfinished) if r.done.is_set()]
            for k in old[:excess]:
                del self._runs[k]
                self._untrimmed.pop(k, None)

    # --- running -----------------------------------------------------------------------------------------
    def _pump(self, key: tuple[str, str]) -> None:
        """Start the thread's next due run when none is running (a timer wakes a later one)."""
        with self._lock:
            runs = self._threads.get(key)
            if runs is None or runs.active is not None or self._closed:
                return
            now = time.time()
            due = [r for r in runs.pending if r.due <= now]
            if not due:
                if not runs.pending:
                    del self._threads[key]
                elif runs.wake_at is None or runs.wake_at > runs.pending[0].due:
                    runs.wake_at = runs.pending[0].due
                    timer = threading.Timer(max(0.0, runs.wake_at - now), self._wake, (key,))
                    timer.daemon = True
                    self._timers = [t for t in self._timers if t.is_alive()] + [timer]
                    timer.start()
                return
            rec = due[0]
            runs.pending.remove(rec)
            runs.active = rec
        self._pool.submit(self._execute, rec)

    def _wake(self, key: tuple[str, str]) -> None:
        with self._lock:
            runs = self._threads.get(key)
            if runs is not None:
                runs.wake_at = None
        self._pump(key)

    def _execute(self, rec: RunRecord) -> None:
        try:
            self._exec.run(rec, self._starts.pop(rec.run_id, None))
        finally:
            with self._lock:
                runs = self._threads.get(rec.key)
                if runs is not None and runs.active is rec:
                    runs.active = None
            self._pump(rec.key)

    # --- reading -------------------------------------------------------------------------------------------
    def active(self, tenant_id: str, thread_id: str) -> RunRecord | None:
        """The run going on this thread in this process, if any."""
        with self._lock:
            runs = self._threads.get((tenant_id, thread_id))
            rec = runs.active if runs is not None else None
        return rec if rec is not None and not rec.done.is_set() else None

    def busy(self, tenant_id: str, thread_id: str) -> bool:
        """Whether the thread has a run in flight here (running or pending)."""
        with self._lock:
            runs = self._threads.get((tenant_id, thread_id))
            return runs is not None and bool(runs.inflight())

    def get(self, tenant_id: str, run_id: str) -> RunRecord | None:
        """A run this process knows (the tenant must match)."""
        with self._lock:
            return self._runs.get((tenant_id, run_id))

    def for_thread(self, tenant_id: str, thread_id: str) -> list[RunRecord]:
        """The runs of a thread this process knows, newest first."""
        with self._lock:
            runs = [r for (t, _), r in self._runs.items() if t == tenant_id and r.thread_id == thread_id]
        return list(reversed(runs))

    def live(self, tenant_id: str) -> list[RunRecord]:
        """The tenant's runs in flight in this process (running, then pending)."""
        with self._lock:
            return [r for (t, _), runs in self._threads.items() if t == tenant_id for r in runs.inflight()]

    def inflight(self) -> list[RunRecord]:
        """Every run in flight in this process (running, then pending, thread by thread)."""
        with self._lock:
            return [r for runs in self._threads.values() for r in runs.inflight()]

    def shutdown(self) -> None:
        """Stop taking runs: pending ones are marked interrupted; running ones finish on their threads."""
        with self._lock:
            self._closed = True
            pending = [r for runs in self._threads.values() for r in runs.pending]
            for runs in self._threads.values():
                runs.pending = []
            for timer in self._timers:
                timer.cancel()
        for rec in pending:
            rec.cancel_action = CancelAction.INTERRUPT
            self._drop_pending(rec)
        self._pool.shutdown(wait=False, cancel_futures=True)


def _relay(rec: RunRecord) -> None:
    """Tell the worker running `rec` of its cancel now (its job tells it too, at its next read)."""
    tell = rec.relay_cancel
    if tell is None:
        return
    try:
        tell()
    except Exception as err:
        log.warning("run %s: the cancel is relayed to its worker at its next read: %s", rec.run_id, err)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[BaseException | None], None], arg: Any) -> None:
    loop.call_soon_threadsafe(fn, arg)
