"""`agentrt doctor ID --repair`: what the doctor may change, under the session lease.

- A torn tail (an incomplete last line left by a crash mid-append) is skipped by every read and cut
  by the next append anyway; `--repair` cuts it now with `checkpointing.records.cut_torn_tail`
  (the bytes move to `<file>.broken`, logged).
- A damaged outbox (`outbox.jsonl`: its torn tail is an unreadable debt, a bad line stops every
  read of the session) is replaced by one debt of every kind to every layer (`Outbox.repair`:
  the old bytes move to `outbox.jsonl.broken`, logged), so the next read replays every layer
  from the source of truth.

The lease is taken first, so a live writer's half-written append is never mistaken for a crash:
while someone holds the session, nothing is touched (`LeaseHeld`). Any other damaged file is
left as it is (the doctor's `files` check names it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.doctor.facts import scan_file, session_files
from agent.session.outbox import Outbox
from checkpointing.layout import OUTBOX_FILE, broken_file
from checkpointing.records import cut_torn_tail

if TYPE_CHECKING:
    from pathlib import Path

    from agent.runner import AgentRunner

__all__ = ["repair_session", "repair_torn_tails"]


def repair_session(runner: AgentRunner, session_id: str, tenant_id: str | None = None) -> list[tuple[Path, str]]:
    """Every repair `--repair` makes on the session: (file, what was done), one per file changed."""
    tenant = tenant_id or runner.settings.session.tenant_id
    directory = runner.session_dir(tenant, session_id)
    if not directory.is_dir():
        return []  # nothing to repair, and taking the lease would create the folder
    grant = runner.lease.acquire(tenant, session_id, ttl_s=runner.settings.persistence.lease_ttl_s)
    try:
        done: list[tuple[Path, str]] = []
        for name in session_files(directory):
            if name == OUTBOX_FILE:
                continue  # its torn tail stands for debts: `Outbox.repair` below
            scan = scan_file(directory / name)
            if scan.torn and cut_torn_tail(scan.path):
                done.append((scan.path, f"cut the torn tail of {scan.path} (kept in {broken_file(scan.path).name})"))
        outbox = Outbox(runner.settings.base_dir)
        said = outbox.repair(tenant, session_id)
        if said is not None:
            done.append((outbox.path(tenant, session_id), said))
        return done
    finally:
        runner.lease.release(grant)


def repair_torn_tails(runner: AgentRunner, session_id: str, tenant_id: str | None = None) -> list[Path]:
    """`repair_session`, returning only the files it changed."""
    return [path for path, _ in repair_session(runner, session_id, tenant_id)]
