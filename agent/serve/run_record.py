"""One API run as this server process sees it: its status, its `RunEvent`s and the server-sent events
they make.

A `RunRecord` keeps the run's `RunEvent`s in order and translates each, once, into the server-sent
events of the run's stream modes, numbered from 1 and appended to the record store as they come
(agent/serve/stream_log.py); any number of subscribers (an SSE response, a join from a
`Last-Event-ID`, the page's live view) replay what they missed and then follow it.

The API run id is the server's (a UUIDv7 given when the run is created, so a queued run has its id
before it starts); `agent_run_id` is the agentrt run (turn) it starts or continues, and `segment`
the `run_resume` entry that opened it when it continues one (agent/serve/run_log.py).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import uuid6

from agent.core.config import AgentSettings
from agent.core.results import RunEvent
from agent.serve.stream_log import StreamLog
from agent.serve.streams import StreamTranslator

THIS_SERVER = f"server {socket.gethostname()}:{os.getpid()}"
EXECUTOR_KEY = "executed_by"
HELD_BY = "held_by"
"""Run table: the server process that holds the run (a pending run lives only in its memory)."""
AGENT_RUN_KEY = "agentrt_run_id"
"""Run metadata: the agentrt run (turn) the API run started or continued (`agentrt show` names it)."""


class ApiRunStatus(StrEnum):
    """A run's status as the Agent Server API names it (an agentrt turn's own is `agent.core.statuses.RunStatus`)."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    INTERRUPTED = "interrupted"


class Strategy(StrEnum):
    """`multitask_strategy`: what a new run does when the thread has runs in flight."""

    REJECT = "reject"
    ENQUEUE = "enqueue"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"


class CancelAction(StrEnum):
    """What a cancel does to a run in flight."""

    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"


def now_iso() -> str:
    """The current UTC time as ISO 8601."""
    return datetime.now(UTC).isoformat()


def new_run_id() -> str:
    """A new API run id (UUIDv7: newer runs sort after older ones, as LangGraph's do)."""
    return str(uuid6.uuid7())


Job = Callable[[], Iterator[RunEvent]]


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
    run_id: str = field(default_factory=new_run_id)
    strategy: Strategy = Strategy.REJECT
    agent_run_id: str = ""
    segment: str = ""
    """The `run_resume` entry that opened this run's part of its agentrt run ("" : the run started it)."""
    executor: str = ""
    """Who runs it: `server HOST:PID`, or the Celery worker `NAME@HOST:PID` (Run metadata `executed_by`)."""
    status: ApiRunStatus = ApiRunStatus.PENDING
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    due: float = 0.0
    """When it may start (`time.time()`; `after_seconds` sets it later)."""
    has_input: bool = False
    """A new turn (it has input), not a continuation."""
    supersedes: bool = False
    """It interrupted a run in flight (`multitask_strategy: interrupt`): its turn may discard that run's
    unfinished step."""
    job: Job | None = None
    cancel_action: CancelAction | None = None
    stop_clean: bool = False
    """Stop only where a new turn can follow (not between a model's tool calls and their results)."""
    deleted: bool = False
    """Rolled back: its writes are gone from the thread and it is no longer listed."""
    events: list[RunEvent] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    final_values: dict[str, Any] = field(default_factory=dict)
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    cancel_requested: threading.Event = field(default_factory=threading.Event)
    relay_cancel: Callable[[], None] | None = None
    """Tells the worker running it at once that it is cancelled (a run on the workers, once submitted)."""
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

    @property
    def key(self) -> tuple[str, str]:
        """(tenant, thread): the engine runs one run per key at a time."""
        return (self.tenant_id, self.thread_id)

    def begin(self, settings: AgentSettings) -> None:
        """At the run's first event: the stream starts with its `metadata` event."""
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

    def _emit(self, pairs: list[tuple[str, Any]]) -> None:
        with self._lock:
            first = len(self.streamed) + 1
            numbered = [(first + k, name, data) for k, (name, data) in enumerate(pairs)]
            self.streamed.extend(numbered)
        if self._log is not None:
            self._log.append(numbered)
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            subs = list(self._subs)
        for loop, wake in subs:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the subscriber's loop is gone (client disconnected)
                pass

    def finish(self, status: ApiRunStatus) -> None:
        """Mark the run over (its closing events last) and wake every subscriber."""
        closing: list[tuple[str, Any]] = []
        if self.error is not None and status is ApiRunStatus.ERROR:
            closing.append(("error", self.error))
        elif self._translator is not None:
            closing.extend(self._translator.closing(self.interrupts))
        with self._lock:
            first = len(self.streamed) + 1
            numbered = [(first + k, name, data) for k, (name, data) in enumerate(closing)]
        # Kept before anyone sees the run over: a waiter may delete the thread (a stateless run) at once.
        if self._log is not None:
            if self.deleted:
                self._log.remove_quietly()
            else:
                self._log.append(numbered, end=True)
        with self._lock:
            self.streamed.extend(numbered)
            self.status = status
            self.updated_at = now_iso()
            self.done.set()
        self._wake()

    def trim(self) -> None:
        """An old finished run: drop its buffers (replays read the record store) and what only a run
        in flight needs (its job, its stream translator and log), so that the many finished runs a
        server keeps hold little for the collector to walk."""
        with self._lock:
            self.events, self.streamed, self.trimmed = [], [], True
        self.job = self._translator = self._log = None

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
        meta = dict(self.metadata)
        if self.executor:
            meta[EXECUTOR_KEY] = self.executor
        if self.agent_run_id:
            meta[AGENT_RUN_KEY] = self.agent_run_id
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "status": self.status.value,
            "metadata": meta,
            "multitask_strategy": self.strategy.value,
            "kwargs": self.kwargs,
        }

    def row(self) -> dict[str, Any]:
        """What the thread's run table keeps of it (agent/serve/run_table.py)."""
        segment = [self.agent_run_id, self.segment] if self.agent_run_id else None
        return {**self.to_json(), "segment": segment, HELD_BY: THIS_SERVER}
