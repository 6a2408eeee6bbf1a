"""The doctor's checks of the model's context and the tools: the restored history, tool pairing, the journal."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agent.doctor.facts import Check, SessionFacts
from agent.doctor.finding import NOTHING, RESTORE_CP, finding
from agent.loop.message_view import ARCHIVED_KEY, MessageKind, MessageView, ToolPairingError, check_tool_pairs
from agent.runner.recovery import (
    stored_pins,
)
from agent.tools.journal_records import CallIndex, index_record
from agent.tools.journal_records import anomalies as journal_anomalies
from checkpointing.layout import CHECKPOINTS_FILE, JOURNAL_FILE

# --- the model sees incomplete context --------------------------------------------------------------


def _no_state(name: str, f: SessionFacts) -> Check | None:
    if f.state is not None:
        return None
    if f.doc is None and f.doc_error is None and f.state_error is None:
        return finding(name, "OK", "no checkpoint yet: there is no model context to restore", NOTHING)
    return finding(
        name,
        "FAIL",
        f.state_error or f.doc_error or "the graph state could not be restored",
        "see the `files` and `blobs` checks: restore what they name, then run the doctor again",
    )


def model_context(f: SessionFacts) -> Check:
    """messages vs the surface digest vs compression events: is the model's context complete?"""
    if (early := _no_state("model_context", f)) is not None:
        return early
    state = f.state or {}
    msgs = _messages(f)
    store_ids = {str(e.get("tool_call_id")) for e in state.get("tool_result_store") or [] if isinstance(e, dict)}
    events = [e for e in f.branch_path() if e.get("type") == "compression"]
    archived = sorted({str(i) for e in events for i in (e.get("payload") or {}).get("archived_tool_call_ids") or []})
    tool_msgs = [m for m in msgs if m.kind is MessageKind.TOOL]
    pointers = [m.tool_call_id for m in tool_msgs if ARCHIVED_KEY in m.additional_kwargs]
    full = {m.tool_call_id for m in tool_msgs if ARCHIVED_KEY not in m.additional_kwargs}
    stored = stored_pins(f.doc or {}).get("surface_digest")
    ev = {
        "messages": len(msgs),
        "by_role": dict(Counter(m.type for m in msgs)),
        "compression_events": len(events),
        "archived_tool_call_ids": archived,
        "pointers_in_messages": pointers,
        "tool_result_store": len(store_ids),
        "surface_digest": {"checkpoint": stored, "current": f.ctx.pins.surface_digest},
    }
    lost = sorted((set(archived) | set(pointers)) - store_ids)
    if lost:
        return finding(
            "model_context",
            "FAIL",
            f"archived tool results missing from tool_result_store: "
            f"{', '.join(lost)}; the model sees pointers it cannot read back",
            RESTORE_CP,
            lost=lost,
            **ev,
        )
    unrecorded = sorted(set(pointers) - set(archived))
    hard = int(state.get("context_compression_count") or 0)
    hard_events = sum(1 for e in events if (e.get("payload") or {}).get("tier") == "hard")
    if unrecorded or hard > hard_events:
        return finding(
            "model_context",
            "FAIL",
            f"the context was compressed but the event log does not record it: {len(unrecorded)} archived "
            f"results ({', '.join(unrecorded[:5]) or 'none'}) and {max(0, hard - hard_events)} hard "
            "compressions have no compression event",
            "restore events.jsonl from a backup; the compression history (tiers, summaries, archived ids) is lost",
            unrecorded=unrecorded,
            **ev,
        )
    if not msgs and (state.get("execution_history_text") or state.get("tool_result_store")):
        return finding(
            "model_context",
            "FAIL",
            "messages is empty while history exists: the model would lose its tool-call messages",
            RESTORE_CP,
            **ev,
        )
    stale = sorted(set(archived) & full)
    if stale:
        return finding(
            "model_context",
            "WARN",
            f"compression events archived {', '.join(stale)} but the "
            "checkpoint holds them in full (a crash between event and checkpoint)",
            "resume: the memory node compresses again from the checkpoint",
            **ev,
        )
    if stored not in (None, f.ctx.pins.surface_digest):
        return finding(
            "model_context",
            "WARN",
            "the context was built under another runtime surface than the current one",
            "see the `recovery` check for what changed",
            **ev,
        )
    return finding(
        "model_context",
        "OK",
        f"{len(msgs)} runtime messages; {len(archived)} archived results, all in tool_result_store",
        NOTHING,
        **ev,
    )


def _messages(f: SessionFacts) -> list[MessageView]:
    """The state's messages, as the checks read them."""
    return list((f.state or {}).get("messages") or [])


def tool_pairing(f: SessionFacts) -> Check:
    """Every tool call in messages is answered right after it (a pending tail only mid-run)."""
    if (early := _no_state("tool_pairing", f)) is not None:
        return early
    msgs = _messages(f)
    calls = sum(len(m.call_ids) for m in msgs if m.kind is MessageKind.AI)
    try:
        check_tool_pairs(msgs, allow_pending_tail=bool(f.next_nodes))
    except ToolPairingError as err:
        return finding(
            "tool_pairing", "FAIL", str(err), RESTORE_CP + " (a model API rejects this history)", tool_calls=calls
        )
    return finding("tool_pairing", "OK", f"{calls} tool calls, each paired with its result", NOTHING, tool_calls=calls)


# --- a tool executed twice -----------------------------------------------------------------------------


def tool_journal(f: SessionFacts) -> Check:
    """Journal entries with duplicate (run_id, tool_call_id) completions, or an INTENT without an end."""
    scan = f.files[JOURNAL_FILE]
    if not scan.clean:
        return finding(
            "tool_journal",
            "FAIL",
            f"journal.jsonl is damaged ({scan.error}): replays cannot be trusted",
            "restore journal.jsonl from a backup (a torn tail is cut by the next run)",
        )
    if not scan.exists:
        return finding("tool_journal", "OK", "no tool has run yet (no journal.jsonl)", NOTHING)
    recs = list(scan.recs())  # the whole journal: it verified, no torn tail
    index: CallIndex = {}
    for rec in recs:
        index_record(index, rec)
    anomalies = journal_anomalies(index)
    ev: dict[str, Any] = {
        "records": len(recs),
        "completed": sum(1 for r in recs if r.get("kind") == "completed"),
        "anomalies": [
            {"run_id": a.run_id, "tool_call_id": a.tool_call_id, "kind": a.kind, "detail": a.detail} for a in anomalies
        ],
    }
    twice = [a for a in anomalies if a.kind == "completed_twice"]
    if twice:
        return finding(
            "tool_journal",
            "FAIL",
            "; ".join(f"{a.tool_call_id} (run {a.run_id}): {a.detail}" for a in twice),
            "check the tool's side effect for duplicates (two writes, two sends) and which processes "
            "ran the session (see the `lease` check)",
            **ev,
        )
    stored = {
        str(r.get("h"))
        for n, sc in f.files.items()
        if n.endswith(CHECKPOINTS_FILE)
        for r in sc.recs()
        if r.get("k") == "i"
    }
    lost = [r for r in recs if isinstance(r.get("result_item"), dict) and r["result_item"].get("$i") not in stored]
    if lost:
        ev["results_not_stored"] = [r.get("tool_call_id") for r in lost]
        return finding(
            "tool_journal",
            "WARN",
            f"{len(lost)} completed call(s) whose result is not in the checkpoint logs (a machine crash "
            f"lost it): {', '.join(str(r.get('tool_call_id')) for r in lost[:5])}",
            "resume re-runs those calls if they are read-only and reports unsafe ones as 'outcome "
            "unknown'; check whether their effects happened",
            **ev,
        )
    if anomalies:
        return finding(
            "tool_journal",
            "WARN",
            "; ".join(f"{a.tool_call_id}: {a.detail}" for a in anomalies),
            "verify whether the tool's effect happened; resume replays completed calls and reports an "
            "unfinished unsafe one as 'outcome unknown' (never re-runs it silently)",
            **ev,
        )
    return finding("tool_journal", "OK", f"{ev['completed']} completed calls, each recorded once", NOTHING, **ev)
