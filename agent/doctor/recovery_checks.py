"""The doctor's recovery check: whether the session's last run can be resumed by this code."""

from __future__ import annotations

from typing import Any

from agent.core.errors import RecoveryBlocked
from agent.core.statuses import RunStatus
from agent.doctor.context_checks import _messages
from agent.doctor.facts import Check, SessionFacts
from agent.doctor.finding import NOTHING, finding
from agent.runner.recovery import (
    PIN_REASONS,
    check_header,
    check_identity,
    check_restored,
    compare_pins,
    stored_pins,
)
from checkpointing.validation import KNOWN_SCHEMA_VERSIONS
from graph.schema import SCHEMA_VERSION as STATE_SCHEMA_VERSION

# --- recovery blocked -----------------------------------------------------------------------------------


def recovery(f: SessionFacts) -> Check:
    """Would `agentrt resume` be blocked (header, schema, graph, branch, toolset, permissions), and why."""
    if f.session is None:
        return finding("recovery", "FAIL", "recovery would be blocked: no session document", "see `session_found`")
    if f.doc is None:
        if f.doc_error:
            return finding(
                "recovery",
                "FAIL",
                f"recovery would be blocked: the checkpoint cannot be read ({f.doc_error})",
                "see the `files` and `blobs` checks",
            )
        return finding("recovery", "OK", "no checkpoint: nothing to recover (a new turn starts fresh)", NOTHING)
    found = stored_pins(f.doc)
    current = {**f.ctx.pins.as_config(), "state_schema_version": STATE_SCHEMA_VERSION}
    reasons: list[str] = []
    diffs: dict[str, dict[str, Any]] = {}
    try:
        check_header(f.header, f.session)
        if f.doc.get("schema_version") not in KNOWN_SCHEMA_VERSIONS:
            raise RecoveryBlocked(
                "validate_schema",
                "checkpoint schema version unknown",
                sorted(KNOWN_SCHEMA_VERSIONS),
                f.doc.get("schema_version"),
            )
        branches = {str(e.get("branch_id")) for e in f.entries()} | {"main"}
        check_identity(f.doc, f.session, f.ctx.settings.session.agent_id, branches)
    except RecoveryBlocked as err:
        reasons.append(f"{err.reason} (at {err.step})")
    for name in PIN_REASONS:
        try:
            compare_pins(found, f.ctx.pins, set(), (name,))
        except RecoveryBlocked:
            diffs[name] = {"checkpoint": found.get(name), "current": current.get(name)}
    tools = _tool_diff(f)
    reasons += _pin_reasons(diffs, tools)
    if f.state is not None:
        try:
            check_restored(_messages(f))
        except RecoveryBlocked as err:
            reasons.append(err.reason)
    elif f.state_error:
        reasons.append(f.state_error)
    ev = {
        "checkpoint_id": f.doc.get("checkpoint_id"),
        "next_nodes": f.next_nodes,
        "last_run_status": f.session.last_run_status,
        "changed_pins": diffs,
        "tools": tools,
    }
    if reasons:
        return finding(
            "recovery",
            "FAIL",
            "recovery would be blocked: " + "; ".join(reasons),
            "restore the previous config/code, or re-pin on purpose with `agentrt resume "
            f"{f.session_id} --accept-changes {','.join(diffs) or 'all'}` (recorded as an override)",
            **ev,
        )
    if not f.next_nodes:
        return finding(
            "recovery", "OK", "pins match the current code; the last run finished (nothing to resume)", NOTHING, **ev
        )
    if _ended_past_checkpoint(f):
        return finding(
            "recovery",
            "OK",
            f"the last run completed, but its checkpoints after {f.doc.get('checkpoint_id')} were lost to a torn "
            "write: the next turn starts from that checkpoint (nothing to resume)",
            NOTHING,
            **ev,
        )
    step = f"`agentrt resume {f.session_id}`"
    if f.waiting_for_human:
        named = f" --interrupt {f.approval_ids[0]}" if len(f.approval_ids) == 1 else ""
        step = f"it waits for a human decision: `agentrt resume {f.session_id} --approve{named}` (or --reject)"
    return finding(
        "recovery", "OK", f"recovery would pass: pins match; it continues at {', '.join(f.next_nodes)}", step, **ev
    )


def _ended_past_checkpoint(f: SessionFacts) -> bool:
    """The session's last run is recorded COMPLETED with its run_end entry although the checkpoint
    shows a step left (see `agent.runner.unfinished.ended_past_checkpoint`)."""
    s = f.session
    if s is None or s.last_run_status != RunStatus.COMPLETED or not s.last_run_id:
        return False
    return any(
        e.get("type") == "run_end" and (e.get("payload") or {}).get("run_id") == s.last_run_id for e in f.entries()
    )


def _pin_reasons(diffs: dict[str, Any], tools: dict[str, list[str]]) -> list[str]:
    # The toolset hash covers names and permissions, and the surface digest covers every pin: name
    # the most specific change once instead of echoing it through the digests that contain it.
    renamed = bool(tools.get("added") or tools.get("removed"))
    out = [PIN_REASONS[n] for n in ("state_schema_version", "graph_version") if n in diffs]
    if "toolset_hash" in diffs and (renamed or "permissions_hash" not in diffs):
        detail = "; ".join(f"tools {k}: {', '.join(v)}" for k, v in tools.items() if v)
        out.append("toolset changed" + (f" ({detail})" if detail else " (a tool's schema, effect or permissions)"))
    elif "permissions_hash" in diffs:
        out.append(PIN_REASONS["permissions_hash"])
    if "projection_digest" in diffs:
        out.append(PIN_REASONS["projection_digest"])
    if "surface_digest" in diffs and not out:
        out.append(PIN_REASONS["surface_digest"])
    return out


def _tool_diff(f: SessionFacts) -> dict[str, list[str]]:
    starts = [e for e in f.entries() if e.get("type") == "run_start"]
    before = set((starts[-1].get("payload") or {}).get("tools") or []) if starts else set()
    now = set(f.ctx.pins.tool_names)
    return {"added": sorted(now - before), "removed": sorted(before - now)} if before else {}
