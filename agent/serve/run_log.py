"""A thread's runs as the API's Run objects: the run table's rows, the runs live in this process, and
the runs its event log records (any process wrote them: the CLI, a worker, a server before a restart).

In the event log a run is a part of an agentrt run: its `run_start` (the turn) or one of its
`run_resume` entries (an answer to an approval, a continuation), up to the entry that closed it.
Each part is one API run, as LangGraph's server makes a resume a run of its own. A part the run
table names takes that row's id, metadata and strategy; any other is listed with agentrt's run id
(a turn) or the `run_resume` entry's id (a continuation).

Statuses follow LangGraph's server: a run that ended, or stopped to ask a human (the thread is then
`interrupted`), is `success`; one stopped by a cancel, a Ctrl-C or a crash is `interrupted`; a
failed one is `error`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from typing import Any

from agent.serve.run_record import AGENT_RUN_KEY, HELD_BY, THIS_SERVER, ApiRunStatus, RunRecord
from agent.serve.run_table import Runs
from agent.serve.serve_context import ASSISTANT_ID
from agent.session.session import ChatSession
from checkpointing.entry_log import Entry, EventLog

_CLOSING = {"run_end": ApiRunStatus.SUCCESS, "run_fail": ApiRunStatus.ERROR, "run_pause": ApiRunStatus.SUCCESS}
_RUN_TYPES = frozenset({"run_start", "run_resume", *_CLOSING})
Segment = tuple[str, str]
"""(agentrt run id, the `run_resume` entry that opened the part, "" for the turn's start)."""


def logged_runs(events: EventLog, session: ChatSession) -> dict[Segment, dict[str, Any]]:
    """Every run part the session's event log records (all branches), oldest first."""
    parts: dict[Segment, dict[str, Any]] = {}
    open_part: dict[str, Segment] = {}
    for entry in events.entries(_RUN_TYPES):
        run_id = (entry.payload or {}).get("run_id")
        if not run_id:
            continue
        if entry.type in ("run_start", "run_resume"):
            seg = (run_id, "" if entry.type == "run_start" else entry.id)
            parts[seg] = _part(entry, run_id if entry.type == "run_start" else entry.id, run_id, session)
            open_part[run_id] = seg
        elif run_id in open_part:
            part = parts[open_part.pop(run_id)]
            part["status"] = _closed_status(entry)
            part["updated_at"] = entry.ts
    # Unclosed: stopped by a cancel, or killed mid-run (a run live in this server shows its own
    # record instead); a run without input continues it.
    for part in parts.values():
        if part["status"] == ApiRunStatus.RUNNING:
            part["status"] = ApiRunStatus.INTERRUPTED.value
    return parts


def _part(entry: Entry, api_id: str, run_id: str, session: ChatSession) -> dict[str, Any]:
    return {
        "run_id": api_id,
        "thread_id": session.session_id,
        "assistant_id": ASSISTANT_ID,
        "created_at": entry.ts,
        "updated_at": entry.ts,
        "status": ApiRunStatus.RUNNING,
        "metadata": {"branch_id": entry.branch_id, AGENT_RUN_KEY: run_id},
        "multitask_strategy": "reject",
        "kwargs": {},
    }


def _closed_status(entry: Entry) -> str:
    if entry.type == "run_fail" and (entry.payload or {}).get("interrupted"):
        return ApiRunStatus.INTERRUPTED.value  # Ctrl-C
    return _CLOSING[entry.type].value


def thread_runs(parts: dict[Segment, dict[str, Any]], table: Runs, live: Iterable[RunRecord]) -> list[dict[str, Any]]:
    """The thread's runs, newest first: live records first-hand, rows of the table with the status
    the event log gives once their run is no longer live here, and the log's other parts."""
    live_by_id = {r.run_id: r for r in live if not r.deleted}
    hidden = {_segment(row) for row in table.deleted.values()}
    claimed: set[Segment] = set()
    out: dict[str, dict[str, Any]] = {}
    for run_id, row in table.rows.items():
        seg = _segment(row)
        if seg is not None:
            claimed.add(seg)
        rec = live_by_id.pop(run_id, None)
        if rec is not None:
            out[run_id] = rec.to_json()
            continue
        shown = {k: v for k, v in row.items() if k not in ("segment", HELD_BY)}
        logged = parts.get(seg) if seg is not None else None
        holder = str(row.get(HELD_BY) or "")
        if logged is not None and logged["status"] == ApiRunStatus.INTERRUPTED and holder and not holder_gone(holder):
            logged = None  # unclosed in the log: still going on the server that holds it (not this one)
        if logged is not None and row.get("status") in (ApiRunStatus.PENDING, ApiRunStatus.RUNNING):
            shown["status"], shown["updated_at"] = logged["status"], logged["updated_at"]
        elif row.get("status") in (ApiRunStatus.PENDING, ApiRunStatus.RUNNING) and holder_gone(holder):
            shown["status"] = ApiRunStatus.INTERRUPTED.value  # queued in a server process that is gone
        out[run_id] = shown
    for seg, part in parts.items():
        if seg not in claimed and seg not in hidden and part["run_id"] not in out:
            out[part["run_id"]] = part
    for rec in live_by_id.values():
        out.setdefault(rec.run_id, rec.to_json())
    return sorted(out.values(), key=lambda r: str(r["created_at"]), reverse=True)


def holder_gone(holder: str) -> bool:
    """Whether the server process `holder` (`server HOST:PID`) is this one (which would list the run
    live) or a process of this host that is no longer there; another host's cannot be told."""
    if holder == THIS_SERVER:
        return True
    host, _, pid = holder.removeprefix("server ").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, another user's
        return False
    return False


def _segment(row: dict[str, Any]) -> Segment | None:
    seg = row.get("segment")
    return (str(seg[0]), str(seg[1])) if isinstance(seg, list) and len(seg) == 2 else None
