"""One decision for one approval: the check a `--approve` / `--reject` must pass before it applies.

A pending approval is a LangGraph interrupt raised by the acting node before a tool that needs a
human's yes; its id is the interrupt's id (`Interrupt.id`, shown by `agentrt show` and in the pause
message). `check_decision` runs under the session lease, on the graph state read after the lease
was granted, and before anything is written: a decision whose approval is no longer pending
(answered, the run moved on, another one is pending) raises `ApprovalNotPending` and the session is
left exactly as it was; one naming an approval the session never asked for raises `ApprovalNotFound`
(the approvals asked are the `hitl_request` entries of its event log). Without an id, a decision
applies only when exactly one approval is pending.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agent.core.errors import ApprovalNotFound, ApprovalNotPending, InputError
from checkpointing.ids import shown

_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def checked_interrupt_id(interrupt_id: str | None) -> str | None:
    """`interrupt_id` when it has the form of an id (safe to echo), else `InputError`."""
    if interrupt_id is None or _ID.match(interrupt_id):
        return interrupt_id
    raise InputError(
        f"--interrupt {shown(interrupt_id)} is not an approval id (letters, digits, _ and -); "
        "`agentrt show ID` prints the pending one"
    )


def asked_approvals(events: Any) -> set[str]:
    """The approval ids a session's event log (`EventLog`) records as asked or answered."""
    entries = events.entries(frozenset({"hitl_request", "hitl_decision"}))
    return {str(e.payload["interrupt_id"]) for e in entries if (e.payload or {}).get("interrupt_id")}


def check_decision(
    sid: str,
    pending: list[dict[str, Any]],
    answered: bool,
    interrupt_id: str | None,
    asked: Callable[[], set[str]] | None = None,
) -> str:
    """The interrupt id a decision applies to; `ApprovalNotPending` when it applies to none, and
    `ApprovalNotFound` when `interrupt_id` is none of the ids `asked()` (read only then) returns."""
    show = f"nothing was changed; `agentrt show {sid}` shows what the session waits for"
    ids = [str(p.get("interrupt_id")) for p in pending]
    if interrupt_id is not None and interrupt_id not in ids and asked is not None and interrupt_id not in asked():
        now = f"approval {ids[0]} for tool {pending[0].get('name')} is pending now" if ids else "none is pending now"
        raise ApprovalNotFound(f"session {sid} never asked for approval {interrupt_id} ({now}); {show}")
    named = interrupt_id or (ids[0] if len(ids) == 1 else "")
    if answered:
        raise ApprovalNotPending(
            f"session {sid}: approval {named} is no longer pending: it was already answered before the run "
            f"stopped; resume without --approve/--reject (`agentrt resume {sid}`)",
            answered=True,
        )
    if interrupt_id is not None:
        if interrupt_id in ids:
            return interrupt_id
        now = f"approval {ids[0]} for tool {pending[0].get('name')} is pending now" if ids else "none is pending now"
        raise ApprovalNotPending(f"session {sid}: approval {interrupt_id} is no longer pending ({now}); {show}")
    if len(ids) == 1:
        return ids[0]
    if not ids:
        raise ApprovalNotPending(f"session {sid} has no pending approval to approve or reject; {show}")
    raise ApprovalNotPending(
        f"session {sid} has {len(ids)} pending approvals ({', '.join(ids)}): name one with --interrupt ID; {show}"
    )
