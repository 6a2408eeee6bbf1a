"""`agentrt doctor ID --repair`: the one thing the doctor may change, torn tails, under the session lease.

A torn tail (an incomplete last line left by a crash mid-append) is skipped by every read and cut
by the next append anyway; `--repair` cuts it now with `checkpointing.records.cut_torn_tail`
(the bytes move to `<file>.broken`). The lease is taken first, so a live writer's half-written
append is never mistaken for a crash: while someone holds the session, nothing is touched
(`LeaseHeld`). A file damaged elsewhere is left as it is (the doctor's `files` check names it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.doctor.facts import scan_file, session_files
from checkpointing.records import cut_torn_tail

if TYPE_CHECKING:
    from pathlib import Path

    from agent.runner import AgentRunner

__all__ = ["repair_torn_tails"]


def repair_torn_tails(runner: AgentRunner, session_id: str, tenant_id: str | None = None) -> list[Path]:
    """Cut the torn tail of every record file of the session; returns the files cut."""
    tenant = tenant_id or runner.settings.session.tenant_id
    directory = runner.session_dir(tenant, session_id)
    if not directory.is_dir():
        return []  # nothing to repair, and taking the lease would create the folder
    grant = runner.lease.acquire(tenant, session_id, ttl_s=runner.settings.persistence.lease_ttl_s)
    try:
        cut: list[Path] = []
        for name in session_files(directory):
            scan = scan_file(directory / name)
            if scan.torn and cut_torn_tail(scan.path):
                cut.append(scan.path)
        return cut
    finally:
        runner.lease.release(grant)
