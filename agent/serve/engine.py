"""Runs of the server: each turn goes through the AgentRunner on a thread of a bounded pool, or, with
`serve.runs_on` naming the workers, a thread of that pool follows the turn a Celery worker runs
(agent/serve/workers.py); both yield the same `RunEvent`s.

A `RunRecord` keeps the run's `RunEvent`s in order and translates each, once, into the server-sent
events of the run's stream modes, numbered from 1 and appended to the record store as they come
(agent/serve/stream_log.py); any number of subscribers (an SSE response, a join from a
`Last-Event-ID`, the page's live view) replay what they missed and then follow it. The API run id
is agentrt's run id (the `run_start` entry of the event log), so a run the client knew before a
server restart is the run `agentrt resume` continues.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from agent.config import AgentSettings
from agent.errors import SessionError
from agent.results import RunEvent
from agent.serve.auth import Principal
from agent.serve.encode import jsonable
from agent.serve.runner import ServeRunner
from agent.serve.stream_log import StreamLog
from agent.serve.streams import StreamTranslator

KEEP_FINISHED_RUNS = 500
KEEP_EVENTS_OF = 50
THIS_SERVER = f"server {socket.gethostname()}:{os.getpid()}"
EXECUTOR_KEY = "executed_by"


class RunStatus(StrEnum):
    """The API's run statuses."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    INTERRUPTED = "interrupted"


class ThreadBusy(SessionError):
    """A run is already going on this thread (HTTP 409)."""


def now_iso() -> str:
    """The current UTC time as ISO 8601."""
    return datetime.now(UTC).isoformat()


@dataclass
class RunRecord:
    """One run seen by this server process: its `RunEvent`s (the page follows them) and the
    server-sent events they make (id, event, data), kept in the record store as they come
    (agent/serve/stream_log.py) for replays."""

    thread_id: str
    tenant_id: str
    assistant_id: str
    metadata: dict[str, Any]
    kwargs: dict[str, Any]
    run_id: str = ""
    executor: str = ""
    """Who runs it: `server HOST:PID`, or the Celery worker `NAME@HOST:PID` (Run metadata `executed_by`)."""
    status: RunStatus = RunStatus.PENDING
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    events: list[RunEvent] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    final_values: dict[str, Any] = field(default_factory=dict)
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    cancel_requested: threading.Event = field(default_factory=threading.Event)
    modes: frozenset[str] = frozenset({"values"})
    """The stream modes its events are made for (what a join can ask for)."""
    subgraphs: bool = False
    streamed: list[tuple[int, str, Any]] = field(default_factory=list)
    """Its server-sent events so far: (id, event, data), ids from 1."""
    trimmed: bool = False
    """Its buffers were dropped (an old finished run): replays read the record store."""
    _translator: StreamTranslator | None = None
    _log: StreamLog | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _subs: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)

    def begin(self, settings: AgentSettings) -> None:
        """At the run's first event (its id known): the stream starts with its `metadata` event."""
        self._translator = StreamTranslator(self.modes, self.run_id, self.subgraphs)
        self._log = StreamLog(settings, self.tenant_id, self.thread_id, self.run_id)
        self._log.reset()
        self._emit([("metadata", {"run_id": self.run_id, "thread_id": self.thread_id, "attempt": 1})])

    def push(self, ev: RunEvent) -> None:
        """Append an event and the server-sent events it makes; wake every subscriber."""
        pairs = list(self._translator.translate(ev)) if self._translator is not None else []
        with self._lock:
            self.events.append(ev)
        self._emit(pairs)

    def _emit(self, pairs: list[tuple[str, Any]], end: bool = False) -> None:
        with self._lock:
            first = len(self.streamed) + 1
            numbered = [(first + k, name, data) for k, (name, data) in enumerate(pairs)]
            self.streamed.extend(numbered)
        if self._log is not None:
            self._log.append(numbered, end)
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            subs = list(self._subs)
        for loop, wake in subs:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the subscriber's loop is gone (client disconnected)
                pass

    def finish(self, status: RunStatus) -> None:
        """Mark the run over (its closing events last) and wake every subscriber."""
        closing: list[tuple[str, Any]] = []
        if self.error is not None and status is RunStatus.ERROR:
            closing.append(("error", self.error))
        elif self._translator is not None:
            closing.extend(self._translator.closing(self.interrupts))
        with self._lock:
            first = len(self.streamed) + 1
            numbered = [(first + k, name, data) for k, (name, data) in enumerate(closing)]
            self.streamed.extend(numbered)
            self.status = status
            self.updated_at = now_iso()
            self.done.set()
        if self._log is not None:
            self._log.append(numbered, end=True)
        self._wake()

    async def wait(self) -> None:
        """Until the run is over (no thread held while waiting)."""
        async for _ in self.follow():
            pass

    def follow(self, heartbeat_s: float | None = None) -> AsyncIterator[RunEvent | None]:
        """Every `RunEvent` of the run: those already buffered, then the new ones until it ends.

        With `heartbeat_s`, yields None after that long without an event (streams send a comment,
        so proxies keep a connection open through a long tool call).
        """
        return self._follow(lambda: self.events, 0, heartbeat_s)

    def follow_streamed(
        self, after: int = 0, heartbeat_s: float | None = None
    ) -> AsyncIterator[tuple[int, str, Any] | None]:
        """The run's server-sent events after id `after`, then the new ones until it ends (None:
        a heartbeat, as `follow`)."""
        return self._follow(lambda: self.streamed, after, heartbeat_s)

    async def _follow(
        self, items: Callable[[], list[Any]], start: int, heartbeat_s: float | None
    ) -> AsyncIterator[Any]:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        sub = (loop, wake)
        with self._lock:
            self._subs.append(sub)
        try:
            pos = start
            while True:
                wake.clear()  # before reading: a push after the read sets it again
                with self._lock:
                    new = items()[pos:]
                    over = self.done.is_set()
                pos += len(new)
                for item in new:
                    yield item
                if over:
                    return
                try:
                    await asyncio.wait_for(wake.wait(), heartbeat_s)
                except TimeoutError:
                    yield None
        finally:
            with self._lock:
                if sub in self._subs:
                    self._subs.remove(sub)

    def to_json(self) -> dict[str, Any]:
        """The API's Run object."""
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "status": self.status.value,
            "metadata": {**self.metadata, EXECUTOR_KEY: self.executor} if self.executor else self.metadata,
            "multitask_strategy": "reject",
            "kwargs": self.kwargs,
        }


class RunEngine:
    """Starts runs on a thread pool and keeps their records (one live run per thread)."""

    def __init__(self, runner: ServeRunner, threads: int) -> None:
        self.runner = runner
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="agentrt-serve-run")
        self._lock = threading.Lock()
        self._active: dict[tuple[str, str], RunRecord] = {}
        self._runs: OrderedDict[tuple[str, str], RunRecord] = OrderedDict()

    async def start(self, principal: Principal, rec: RunRecord, make: Callable[[], Iterator[RunEvent]]) -> RunRecord:
        """Start `make()`'s run; returns once it has started (its run id known) or raises why it could not.

        Waiting costs no thread: a run queued behind busy pool threads holds only this coroutine.
        """
        key = (principal.tenant_id, rec.thread_id)
        with self._lock:
            active = self._active.get(key)
            if active is not None and not active.done.is_set():
                raise ThreadBusy(
                    f"thread {rec.thread_id} already has a run going ({active.run_id}); join it or cancel it first"
                )
            self._active[key] = rec
        loop = asyncio.get_running_loop()
        started: asyncio.Future[BaseException | None] = loop.create_future()

        def resolve(err: BaseException | None) -> None:
            if not started.done():
                started.set_result(err)

        def on_start(err: BaseException | None) -> None:
            loop.call_soon_threadsafe(resolve, err)

        self._pool.submit(self._execute, rec, make, on_start)
        failure = await started
        if failure is not None:
            with self._lock:
                if self._active.get(key) is rec:
                    del self._active[key]
            raise failure
        with self._lock:
            self._runs[(principal.tenant_id, rec.run_id)] = rec
            self._runs.move_to_end((principal.tenant_id, rec.run_id))
            finished = [r for r in self._runs.values() if r.done.is_set()]
            for old in finished[: max(0, len(finished) - KEEP_EVENTS_OF)]:
                # their subscribers are gone; keep the record, drop the states it holds (replays read the store)
                old.events, old.streamed, old.trimmed = [], [], True
            for k in [k for k, r in self._runs.items() if r.done.is_set()][:-KEEP_FINISHED_RUNS]:
                del self._runs[k]
        return rec

    def _execute(
        self,
        rec: RunRecord,
        make: Callable[[], Iterator[RunEvent]],
        on_start: Callable[[BaseException | None], None],
    ) -> None:
        status = RunStatus.ERROR
        started = False
        try:
            gen = make()
            for ev in gen:
                if not started:
                    rec.run_id = str(ev.data.get("run_id") or "")
                    rec.executor = str(ev.data.get("worker") or THIS_SERVER)
                    rec.status = RunStatus.RUNNING
                    rec.begin(self.runner.settings)
                    started = True
                    on_start(None)
                if ev.kind == "final":
                    rec.result = ev.data
                rec.push(ev)
                if rec.cancel_requested.is_set():
                    if isinstance(gen, Generator):
                        gen.close()  # the runner releases the lease; the last checkpoint stays resumable
                    status = RunStatus.INTERRUPTED
                    break
            else:
                status = _status_of(rec.result)
        except BaseException as err:  # handed to the request (before start) or to the stream (after)
            if not started:
                on_start(err)
                return
            rec.error = {"error": type(err).__name__, "message": str(err)}
            status = RunStatus.ERROR
        if not started:  # a run that yielded nothing: nothing to follow
            on_start(SessionError("the run ended before it started; see the server log"))
            return
        if status is RunStatus.ERROR and rec.error is None:
            message = str((rec.result or {}).get("error") or (rec.result or {}).get("finish_reason") or "run failed")
            rec.error = {"error": "RunFailed", "message": message}
        self._read_final(rec)
        rec.finish(status)

    def _read_final(self, rec: RunRecord) -> None:
        try:
            snap = self.runner.graph.get_state(
                {"configurable": {"thread_id": rec.thread_id, "tenant_id": rec.tenant_id}}
            )
        except Exception:  # the run's outcome is already known; the values are a courtesy
            return
        rec.final_values = jsonable(snap.values or {})
        rec.interrupts = [jsonable(i) for i in snap.interrupts]

    def active(self, tenant_id: str, thread_id: str) -> RunRecord | None:
        """The run going on this thread in this process, if any."""
        with self._lock:
            rec = self._active.get((tenant_id, thread_id))
        return rec if rec is not None and not rec.done.is_set() else None

    def get(self, tenant_id: str, run_id: str) -> RunRecord | None:
        """A run this process started (the tenant must match)."""
        with self._lock:
            return self._runs.get((tenant_id, run_id))

    def for_thread(self, tenant_id: str, thread_id: str) -> list[RunRecord]:
        """The runs of a thread this process knows, newest first."""
        with self._lock:
            runs = [r for (t, _), r in self._runs.items() if t == tenant_id and r.thread_id == thread_id]
        return list(reversed(runs))

    def live(self, tenant_id: str) -> list[RunRecord]:
        """The tenant's runs going in this process."""
        with self._lock:
            return [r for (t, _), r in self._active.items() if t == tenant_id and not r.done.is_set()]

    def shutdown(self) -> None:
        """Stop taking runs; running ones finish on their threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _status_of(result: dict[str, Any] | None) -> RunStatus:
    status = (result or {}).get("status")
    if status == "COMPLETED":
        return RunStatus.SUCCESS
    if status in ("PAUSED", "INTERRUPTED"):
        return RunStatus.INTERRUPTED
    return RunStatus.ERROR
