"""How `runs.list` merges a thread's runs: the server's run table, the runs live in this process, and
the run parts of the session's event log (agent/serve/run_log.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any

from agent.serve.run_log import Segment, thread_runs
from agent.serve.run_record import THIS_SERVER, ApiRunStatus, RunRecord
from agent.serve.run_table import Runs


def part(run_id: str, status: str, at: str) -> dict[str, Any]:
    return {"run_id": run_id, "status": status, "created_at": at, "updated_at": at, "metadata": {}}


def row(run_id: str, status: str, at: str, segment: Segment | None, held_by: str = THIS_SERVER) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "status": status,
        "created_at": at,
        "updated_at": at,
        "metadata": {"mine": True},
        "multitask_strategy": "enqueue",
        "segment": list(segment) if segment else None,
        "held_by": held_by,
    }


def test_a_row_names_its_part_and_a_part_without_a_row_keeps_agentrt_s_id():
    parts = {
        ("r-1", ""): part("r-1", "success", "1"),
        ("r-1", "e-2"): part("e-2", "success", "2"),
        ("r-3", ""): part("r-3", "interrupted", "3"),
    }
    table = Runs(
        rows={"api-a": row("api-a", "running", "1", ("r-1", "")), "api-b": row("api-b", "success", "25", None)}
    )
    listed = thread_runs(parts, table, [])
    assert [(r["run_id"], r["status"]) for r in listed] == [
        ("r-3", "interrupted"),
        ("api-b", "success"),
        ("e-2", "success"),
        ("api-a", "success"),  # the table said running; the event log has it closed
    ]
    assert listed[-1]["metadata"] == {"mine": True} and "segment" not in listed[-1] and "held_by" not in listed[-1]


def test_a_rolled_back_run_hides_its_part_and_a_live_run_is_listed_first_hand():
    parts = {("r-1", ""): part("r-1", "interrupted", "1"), ("r-2", ""): part("r-2", "running", "2")}
    gone = row("api-x", "running", "1", ("r-1", ""))
    live = RunRecord(thread_id="t", tenant_id="default", assistant_id="a", metadata={}, kwargs={}, run_id="api-y")
    live.status, live.created_at, live.agent_run_id = ApiRunStatus.RUNNING, "2", "r-2"
    table = Runs(rows={"api-y": row("api-y", "pending", "2", None)}, deleted={"api-x": gone})
    listed = thread_runs(parts, table, [live])
    assert [(r["run_id"], r["status"]) for r in listed] == [("api-y", "running"), ("r-2", "running")]


def test_a_pending_run_of_a_server_process_that_is_gone_shows_interrupted():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    here = socket.gethostname()
    table = Runs(
        rows={
            "lost": row("lost", "pending", "1", None, held_by=f"server {here}:{dead.stdout.strip()}"),
            "elsewhere": row("elsewhere", "pending", "2", None, held_by="server another-host:1"),
        }
    )
    listed = {r["run_id"]: r["status"] for r in thread_runs({}, table, [])}
    assert listed == {"lost": "interrupted", "elsewhere": "pending"}
