"""Following the runs of a thread that another server process holds (servers over one store).

Every run's row in the thread's run table names the server holding it (agent/serve/run_table.py),
and every run's server-sent events are appended to the record store as they come
(agent/serve/stream_log.py). A thread follower (agent/serve/thread_follow.py) reads the rows
appended to the table every `REMOTE_POLL_S`, and follows each run of another server by reading the
events appended to its stream, until its end mark (or, for a run that ended without one, e.g. a
pending run cancelled before it started, until its row says it is over).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from agent.core.config import AgentSettings
from agent.serve.encode import INTERRUPT_KEY
from agent.serve.run_log import holder_gone
from agent.serve.run_record import HELD_BY, THIS_SERVER, ApiRunStatus, RunRecord
from agent.serve.run_table import RunTable
from agent.serve.stream_log import StreamLog

REMOTE_POLL_S = 0.25
"""How often the record store is read for the runs of other servers and their new events."""
ROW_CHECK_S = 1.0
"""How often a followed run without new events has its row read (did it end without an end mark?)."""
IN_FLIGHT = frozenset({ApiRunStatus.PENDING.value, ApiRunStatus.RUNNING.value})


def is_remote(row: dict[str, Any]) -> bool:
    """Whether the run of a run-table row is held by another server process."""
    return bool(row.get(HELD_BY)) and row.get(HELD_BY) != THIS_SERVER


def in_flight(row: dict[str, Any]) -> bool:
    """Whether a run-table row says its run is pending or running (and the server process holding
    it is not known to be gone: one of this host that exited never ends its runs' rows)."""
    return row.get("status") in IN_FLIGHT and not holder_gone(str(row.get(HELD_BY) or ""))


def shadow(row: dict[str, Any], tenant_id: str) -> RunRecord:
    """A record standing for a run another server holds: its ids, metadata and status (the events
    are read from the record store, never kept in it)."""
    status = str(row.get("status") or "")
    return RunRecord(
        thread_id=str(row.get("thread_id")),
        tenant_id=tenant_id,
        assistant_id=str(row.get("assistant_id") or ""),
        metadata=dict(row.get("metadata") or {}),
        kwargs=dict(row.get("kwargs") or {}),
        run_id=str(row.get("run_id")),
        status=ApiRunStatus(status) if status in ApiRunStatus._value2member_map_ else ApiRunStatus.RUNNING,
        created_at=str(row.get("created_at") or ""),
    )


def remote_row(settings: AgentSettings, tenant_id: str, thread_id: str, run_id: str) -> dict[str, Any] | None:
    """The run's row when another server process holds it and it is in flight (None otherwise)."""
    row = RunTable(settings, tenant_id, thread_id).read().rows.get(run_id)
    return row if row is not None and is_remote(row) and in_flight(row) else None


class RemoteRows:
    """The rows of other servers' runs appended to one thread's run table since the last read."""

    def __init__(self, settings: AgentSettings, tenant_id: str, thread_id: str) -> None:
        self.table = RunTable(settings, tenant_id, thread_id)
        self.pos = 0
        self.read_at = 0.0

    def due(self) -> bool:
        """Whether `REMOTE_POLL_S` passed since the last read."""
        return time.monotonic() - self.read_at >= REMOTE_POLL_S

    def poll(self) -> list[dict[str, Any]]:
        """The rows of other servers' runs appended since the last call (all of them, the first time)."""
        self.read_at = time.monotonic()
        rows, self.pos = self.table.tail(self.pos)
        return [r for r in rows if is_remote(r)]


def _learn(rec: RunRecord, name: str, data: Any) -> None:
    """What the run's end reports that its events tell: its interrupts, its error."""
    if name == "values" and isinstance(data, dict):
        rec.interrupts = list(data.get(INTERRUPT_KEY) or [])
    elif name == "error" and isinstance(data, dict):
        rec.error = data


def _settle(rec: RunRecord, table: RunTable) -> bool:
    """Read the run's row: its final status (True: the run is over, or its row is gone)."""
    row = table.read().rows.get(rec.run_id)
    if row is None:
        rec.status = ApiRunStatus.ERROR
        return True
    if in_flight(row):
        return False
    status = str(row.get("status"))
    # A row still in flight here names a server process that is gone: its run was cut off.
    rec.status = ApiRunStatus.INTERRUPTED if status in IN_FLIGHT else ApiRunStatus(status)
    return True


async def follow_remote(
    settings: AgentSettings, rec: RunRecord, after: int | None
) -> AsyncIterator[tuple[int, str | None, Any]]:
    """The run's events after id `after` (None: those that come from now on) as (id, name, data),
    read from the record store as the other server appends them; last, once it is over, (the id
    after its last event, None, None), its status, error and interrupts set on `rec`."""
    log = StreamLog(settings, rec.tenant_id, rec.thread_id, rec.run_id)
    table = RunTable(settings, rec.tenant_id, rec.thread_id)
    pos, top, checked = 0, 0, time.monotonic()
    while True:
        events, ended, pos = await asyncio.to_thread(log.tail, pos)
        if after is None:
            after = max((i for i, _, _ in events), default=0)
        for event_id, name, data in events:
            top = max(top, event_id)
            _learn(rec, name, data)
            if event_id > after:
                yield event_id, name, data
        if ended:
            await asyncio.to_thread(_settle, rec, table)
            yield top + 1, None, None
            return
        if not events and time.monotonic() - checked >= ROW_CHECK_S:
            checked = time.monotonic()
            if await asyncio.to_thread(_settle, rec, table):
                tail, ended, pos = await asyncio.to_thread(log.tail, pos)  # what came just before its row
                for event_id, name, data in tail:
                    top = max(top, event_id)
                    _learn(rec, name, data)
                    if event_id > after:
                        yield event_id, name, data
                yield top + 1, None, None
                return
        await asyncio.sleep(REMOTE_POLL_S)
