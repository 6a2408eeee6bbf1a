"""The API runs of one thread, kept in the record store beside the thread's session.

agentrt's own history knows turns (`run_start` ... `run_end` in the event log) and their
continuations (`run_resume`); the API's runs are the server's: each has an id from its creation
(a queued run has one before it starts), a `multitask_strategy`, metadata, and, once started, the
part of an agentrt run it is (`segment`: the agentrt run id and the `run_resume` entry that opened
it, "" for the turn's start). The table keeps each run's newest row, appended whole on every
change to the served stream `api.runs` of the session (`served/api.runs.jsonl` on the files
store, rows on PostgreSQL), without an fsync per row: a machine crash may lose the last rows, and
then the runs they named are listed as the event log has them. A rolled-back run is a tombstone.
A cancel sent to another server than the one holding the run is a mark in the same stream, which
the holder reads (agent/serve/run_watch.py). The stream goes with its thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import orjson

from agent.core.config import AgentSettings
from agent.session.record_store import session_streams
from checkpointing.records import encode_record
from checkpointing.store.base import SessionStreams, served_stream

log = logging.getLogger("agentrt.serve")
CANCEL_KEY = "cancel"
"""A record asking the server that holds a run to cancel it (`runs.cancel` sent to another server)."""
TABLE_NAME = "api.runs"
"""Not an id a run can have (a dot is outside the id alphabet), so no run's stream is this one."""


@dataclass
class Runs:
    """The table read back: the newest row of each run, and the runs rolled back."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    deleted: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Rolled-back runs: their last row (its segment hides the agentrt run's part too)."""


class RunTable:
    """The run table of one thread."""

    def __init__(self, settings: AgentSettings, tenant_id: str, thread_id: str) -> None:
        self._streams: SessionStreams = session_streams(settings, tenant_id, thread_id, "never")
        self._name = served_stream(TABLE_NAME)

    def put(self, row: dict[str, Any]) -> None:
        """Keep `row` as its run's newest (a store error is logged: the run goes on, only the
        listing falls back to the event log)."""
        self._append({"run": row})

    def delete(self, row: dict[str, Any]) -> None:
        """Mark the run rolled back: it is listed no more."""
        self._append({"deleted": row})

    def cancel(self, run_id: str, action: str) -> None:
        """Ask the server holding the run to cancel it (`action`: interrupt or rollback): a mark its
        watch reads (agent/serve/run_watch.py)."""
        self._append({CANCEL_KEY: {"run_id": run_id, "action": action}})

    def marks(self, start: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The cancel marks appended from position `start`, and the position to read from next."""
        try:
            scan = self._streams.scan(self._name, start)
        except Exception as err:
            log.warning("could not read the run table: %s", err)
            return [], start
        found = [orjson.loads(body) for _, body in scan.records]
        return [r[CANCEL_KEY] for r in found if isinstance(r.get(CANCEL_KEY), dict)], scan.good

    def _append(self, record: dict[str, Any]) -> None:
        try:
            self._streams.append(self._name, [encode_record(record)], "never", None)
        except Exception as err:
            log.warning("could not keep run %s in the run table: %s", _run_id(record), err)

    def read(self) -> Runs:
        """Every run's newest row (oldest run first); an unreadable table reads as empty."""
        out = Runs()
        try:
            records = self._streams.scan(self._name).records
        except Exception as err:
            log.warning("could not read the run table: %s", err)
            return out
        for _, body in records:
            rec = orjson.loads(body)
            if isinstance(rec.get("run"), dict):
                row = rec["run"]
                out.rows[str(row.get("run_id"))] = row
            elif isinstance(rec.get("deleted"), dict):
                row = rec["deleted"]
                out.rows.pop(str(row.get("run_id")), None)
                out.deleted[str(row.get("run_id"))] = row
        for run_id in out.deleted:
            out.rows.pop(run_id, None)
        return out

    def tail(self, start: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The rows appended from position `start` (each run's newest of them; a rolled-back run's
        row is left out) and the position to read from next; an unreadable table reads as empty."""
        try:
            scan = self._streams.scan(self._name, start)
        except Exception as err:
            log.warning("could not read the run table: %s", err)
            return [], start
        rows: dict[str, dict[str, Any]] = {}
        for _, body in scan.records:
            rec = orjson.loads(body)
            if isinstance(rec.get("run"), dict):
                rows[str(rec["run"].get("run_id"))] = rec["run"]
            elif isinstance(rec.get("deleted"), dict):
                rows.pop(str(rec["deleted"].get("run_id")), None)
        return list(rows.values()), scan.good


def _run_id(record: dict[str, Any]) -> str:
    row = record.get("run") or record.get("deleted") or {}
    return str(row.get("run_id"))
