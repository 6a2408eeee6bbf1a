"""The doctor's checks of records and state, one function per row of the troubleshooting table (see `agent.doctor`).

Every check takes the gathered `SessionFacts` and returns a `Check` whose evidence is a dict with
the one-line finding under `summary`. `run_all` runs them in order and turns a check that itself
trips over damaged data into a FAIL, so the doctor reports on any session it can find.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from agent.doctor import storage_checks as doctor_files
from agent.doctor.behind import lag_lines
from agent.doctor.facts import Check, SessionFacts
from agent.doctor.index import index_check
from agent.doctor.queue_check import worker_queue
from agent.doctor.storage_checks import finding
from agent.errors import RecoveryBlocked
from agent.loop.message_view import ARCHIVED_KEY, MessageKind, MessageView, ToolPairingError, check_tool_pairs
from agent.recovery import (
    OLD_FORMAT,
    PIN_REASONS,
    check_header,
    check_identity,
    check_restored,
    compare_pins,
    stored_pins,
)
from agent.statuses import RunStatus
from agent.tools.journal_records import CallIndex, index_record
from agent.tools.journal_records import anomalies as journal_anomalies
from checkpointing import audit
from checkpointing.entry_log import SCHEMA_VERSION as EVENTS_SCHEMA_VERSION
from checkpointing.layout import CHECKPOINTS_FILE, JOURNAL_FILE, OUTBOX_FILE, PINS_FILE, session_file
from checkpointing.tail import NeedsGraph
from checkpointing.validation import KNOWN_SCHEMA_VERSIONS
from checkpointing.verify import FileKind, Health
from graph.schema import SCHEMA_VERSION as STATE_SCHEMA_VERSION

CACHE_LAYERS = ("L1", "L2")
NOTHING = "nothing to do"
RESTORE_CP = "restore the session's runs/ files from a backup"

# --- session not found ---------------------------------------------------------------------------


def session_found(f: SessionFacts) -> Check:
    """Which layers hold the session, in the order the manager reads them, and what a read returns."""
    manager = f.ctx.manager
    order = " -> ".join(f.layers)
    ev: dict[str, Any] = {
        "mode": manager.mode,
        "read_order": order,
        "layers": f.layers,
        "layer_status": manager.layer_status(),
        "last_read_trace_in_this_process": manager.last_read_trace,
    }
    if f.session is None and f.header is not None:
        return finding(
            "session_found",
            "WARN",
            "no layer holds the session document; a read rebuilds it from events.jsonl",
            "nothing is lost: the next read (`agentrt show ID`) rebuilds it",
            **ev,
        )
    if f.session is None:
        # Which other tenants hold this id is never said: that is theirs to know.
        return finding(
            "session_found",
            "FAIL",
            f"session {f.session_id} not found for tenant {f.tenant_id} in any layer",
            "check the id with `agentrt sessions`, the tenant (--tenant), and that base_dir is the volume "
            "the session was written to",
            **ev,
        )
    hit = _first_hit(f, manager.mode)
    versions = {name: s.version for name, s in f.copies.items()}
    ev.update(read_would_hit=hit, versions=versions, outbox_owes=f.owed)
    if f.behind:
        ev["behind"] = {layer: {"changes": lag.changes, "since": lag.since} for layer, lag in f.behind.items()}
    if hit is None and f.layers.get("JSONL", "").startswith("corrupt"):
        doc = session_file(f.dir)
        why = "SQL is down" if manager.mode == "MIRROR" else "JSONL is the source of truth"
        return finding(
            "session_found",
            "FAIL",
            f"{doc} is damaged and a read of mode {manager.mode} answers from it ({why}): every read of the "
            "session stops with SessionDocumentCorrupt; no other layer's copy is used in its place",
            f"`agentrt doctor {f.session_id} --repair` moves the damaged file aside to session.json.broken, so "
            "the next read takes the copy another layer holds (its version is above) or else rebuilds it "
            f"from events.jsonl; or restore {doc} from a backup",
            **ev,
        )
    problems: list[str] = lag_lines(manager, f.session_id, f.behind)
    for name, answer in f.layers.items():
        if name == "JSONL" and answer.startswith("corrupt") and manager.mode == "MIRROR":
            problems.append(
                f"the JSONL mirror {session_file(f.dir)} is damaged: reads use the SQL copy (the source "
                "of truth), and the next save rewrites the mirror"
            )
        elif answer.startswith(("corrupt", "down")):
            problems.append(f"{name} is {answer}")
        elif answer == "absent" and name != "L1" and not (manager.mode == "MIRROR" and name == "JSONL"):
            problems.append(
                f"{name} does not hold the session: "
                + (
                    f"the next read misses {name} and refills it from {hit}"
                    if name in CACHE_LAYERS
                    else f"the next save writes it to {name}"
                )
            )
    if len(set(versions.values())) > 1:
        problems.append(f"layers disagree on the session version {versions} (a stale copy)")
    if f.owed and not f.behind:  # an unreadable outbox
        problems.append(
            f"the outbox still owes {', '.join(f.owed)} (writes missed in an outage); "
            "the next read of the session replays them once the layer answers"
        )
    if problems:
        replay = (
            f"the writes a layer missed replay when it answers (any read: `agentrt show {f.session_id}`), or now "
            f"with `agentrt doctor {f.session_id} --repair`; "
            if f.behind
            else ""
        )
        return finding(
            "session_found",
            "WARN",
            "; ".join(problems),
            f"{replay}run any read (`agentrt show ID`) to "
            "refill the cache layers; bring a down layer back, restore or delete a corrupt copy",
            **ev,
        )
    return finding("session_found", "OK", f"found; a read takes it from {hit} ({order})", NOTHING, **ev)


def _first_hit(f: SessionFacts, mode: str) -> str | None:
    sql_down = f.layers.get("SQL", "").startswith(("down", "corrupt"))
    for name, answer in f.layers.items():
        if name == "JSONL" and answer.startswith("corrupt") and (mode != "MIRROR" or sql_down):
            return None  # the source of truth is damaged: a read raises rather than use another copy
        if answer == "present" and not (mode == "MIRROR" and name == "JSONL" and not sql_down):
            return name
    return None


def tenant_user(f: SessionFacts) -> Check:
    """The session document, its header and the caller agree on tenant and user."""
    s, h = f.session, f.header or {}
    ev = {
        "tenant": f.tenant_id,
        "user_asked": f.user_id,
        "session_user": s.user_id if s else None,
        "header_tenant": h.get("tenant_id"),
        "header_user": h.get("user_id"),
    }
    if s is None and not h:
        return finding(
            "tenant_user",
            "FAIL",
            f"not visible to tenant {f.tenant_id}",
            "check the id and the tenant (--tenant)",
            **ev,
        )
    owner = s.user_id if s else h.get("user_id")
    if f.user_id is not None and owner != f.user_id:
        return finding(
            "tenant_user",
            "FAIL",
            f"the session belongs to user {owner}, not {f.user_id}: it reads as not found for them",
            f"run as user {owner} (--user) or drop --user",
            **ev,
        )
    if s and h and (h.get("tenant_id") != f.tenant_id or h.get("user_id") not in (None, s.user_id)):
        return finding(
            "tenant_user",
            "FAIL",
            "the event-log header names another tenant/user than the session document",
            "the folder was moved between tenants: restore it from a backup",
            **ev,
        )
    return finding("tenant_user", "OK", f"tenant {f.tenant_id}, user {owner}", NOTHING, **ev)


def header(f: SessionFacts) -> Check:
    """events.jsonl starts with a valid header of a known schema version naming this session."""
    scan = f.events
    ev: dict[str, Any] = {"path": str(scan.path)}
    if not scan.exists:
        return finding(
            "header",
            "FAIL",
            "events.jsonl is missing: the session header and event tree are gone",
            "mount the base_dir volume the session was written to (persistence.base_dir), or restore the folder",
            **ev,
        )
    h = f.header
    if h is None:
        why = scan.error if scan.error and not scan.records else "the first record is not a session header"
        return finding("header", "FAIL", f"no valid header: {why}", "restore events.jsonl from a backup", **ev)
    ev.update({k: h.get(k) for k in ("schema_version", "tenant_id", "session_id", "agent_id", "user_id")})
    if h.get("schema_version") != EVENTS_SCHEMA_VERSION:
        return finding(
            "header",
            "FAIL",
            f"event-log schema_version {h.get('schema_version')!r} is not {EVENTS_SCHEMA_VERSION}",
            "open it with the agentrt version that wrote it",
            **ev,
        )
    if (h.get("tenant_id"), h.get("session_id")) != (f.tenant_id, f.session_id):
        return finding(
            "header",
            "FAIL",
            "the header names another tenant/session than its folder",
            "the folder was copied or renamed: restore it from a backup",
            **ev,
        )
    return finding(
        "header", "OK", f"valid (schema {h.get('schema_version')}, agent {h.get('agent_id')})", NOTHING, **ev
    )


def files(f: SessionFacts) -> Check:
    """Every record file of the session verifies (framing, checksum) and every reference resolves."""
    present = {n: s for n, s in f.files.items() if s.exists}
    ev: dict[str, Any] = {"files": {n: s.error or f"{len(s.records)} records" for n, s in present.items()}}
    corrupt = {n: s.error for n, s in present.items() if s.corrupt}
    torn = {n: s.error for n, s in present.items() if s.torn}
    old = [f"{s.path} line {s.line}" for s in present.values() if s.old_format]
    if old:
        return finding(
            "files",
            "FAIL",
            f"{OLD_FORMAT}: {', '.join(old)} written in on-disk format 1 (this agentrt reads format 2): "
            "recovery is blocked",
            "finish the session with the agentrt that wrote it, or start a new session; nothing rewrites these files",
            corrupt=corrupt,
            **ev,
        )
    tails = [r for r in f.reports if r.health is Health.BAD_TAIL]
    corrupt = {n: e for n, e in corrupt.items() if n not in {r.name for r in tails}}
    if corrupt:
        where = ", ".join(f"{s.path} line {s.line}" for n, s in present.items() if n in corrupt)
        step = "restore the named files from a backup; the runtime never rewrites them"
        if OUTBOX_FILE in corrupt:
            step += (
                f" (outbox.jsonl only names writes the other layers owe: `agentrt doctor {f.session_id} "
                "--repair` replaces it with a full replay of every layer)"
            )
        summary = f"corrupt records (not a torn tail) at {where}: recovery is blocked"
        return finding("files", "FAIL", summary, step, corrupt=corrupt, **ev)
    if tails:
        ev["bad_tails"] = {str(r.path): r.describe() for r in tails}
        where = "; ".join(f"{r.name} from line {r.line} ({r.reason})" for r in tails)
        return finding(
            "files",
            "FAIL",
            f"damaged last records, no intact record after them, at {where}: every read of the session refuses it",
            f"`agentrt doctor {f.session_id} --repair` cuts them (kept in <file>.broken, a document of the store); "
            "every record before them is intact",
            bad_tails=ev.pop("bad_tails"),
            **ev,
        )
    damaged_docs = [r for r in f.reports if r.kind is FileKind.DOCUMENT and r.health.blocks]
    if damaged_docs:
        ev["documents"] = {r.name: r.describe() for r in damaged_docs}
        fixable = [r for r in damaged_docs if r.repairable]
        step = (
            f"`agentrt doctor {f.session_id} --repair` (moves a damaged session.json aside to be rebuilt "
            "from the session's other copies, rebuilds a damaged fence.json, pins every branch's fork point "
            "again in place of a damaged pins.json; keeps the old bytes in <file>.broken)"
            if fixable
            else "restore the named files from a backup"
        )
        where = "; ".join(f"{r.path} is damaged ({r.reason})" for r in damaged_docs)
        refuses = (
            "fork and checkpoint retention refuse it"
            if {r.name for r in damaged_docs} == {PINS_FILE}
            else "every command on the session refuses it"
        )
        return finding("files", "FAIL", f"{where}: {refuses}", step, **ev)
    dangling = dangling_references(f)
    if dangling:
        return finding(
            "files",
            "FAIL",
            "checkpoint records reference records that are not in the run files: " + "; ".join(dangling[:8]),
            RESTORE_CP + "; the checkpoints named cannot be read back",
            dangling=dangling,
            **ev,
        )
    newline = [r for r in f.reports if r.health is Health.TERMINATOR]
    if newline:
        ev["terminator"] = {r.name: r.describe() for r in newline}
        return finding(
            "files",
            "WARN",
            "; ".join(f"{r.path}: {r.describe()}" for r in newline),
            f"nothing is lost; the next append puts the newline back, or do it now: `agentrt doctor {f.session_id} "
            "--repair` (the old byte is kept in <file>.broken)",
            **ev,
        )
    if torn:
        found = [f"torn last record in {f.files[n].path} ({e}): a crash mid-append" for n, e in torn.items()]
        return finding(
            "files",
            "WARN",
            "; ".join(found),
            "every whole record is intact (reads skip the torn one and never change the file); the next run "
            f"or resume moves it aside to <file>.broken, or do it now: `agentrt doctor {f.session_id} --repair`",
            torn=torn,
            **ev,
        )
    return finding("files", "OK", "every record verifies and every reference resolves", NOTHING, **ev)


def dangling_references(f: SessionFacts) -> list[str]:
    """Item records and value homes that checkpoint / writes records reference but no run file holds."""
    return audit.dangling_references(f.run_logs())


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
    shows a step left (see `agent.run.unfinished.ended_past_checkpoint`)."""
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


# --- running ---------------------------------------------------------------------------------------------

CheckFn = Callable[[SessionFacts], Check]
CHECKS: list[tuple[str, CheckFn]] = [
    ("session_found", session_found),
    ("tenant_user", tenant_user),
    ("header", header),
    ("files", files),
    ("model_context", model_context),
    ("tool_pairing", tool_pairing),
    ("tool_journal", tool_journal),
    ("recovery", recovery),
    ("blobs", doctor_files.blobs),
    ("sandbox", doctor_files.sandbox),
    ("lease", doctor_files.lease),
    ("session_index", lambda f: index_check(f.ctx, f.tenant_id, f.session_id)),
    ("worker_queue", worker_queue),
]
NOT_FOUND_CHECKS = ("session_found", "tenant_user", "header")


def run_all(f: SessionFacts) -> list[Check]:
    """Every check in the troubleshooting table's order; only the identity checks when the session is not there."""
    if f.hidden:
        return [
            Check(
                "session_found",
                "FAIL",
                f"session {f.session_id} not found for tenant {f.tenant_id} and user {f.user_id}",
                f"check the id, --tenant and --user; `agentrt sessions --user {f.user_id}` lists yours",
            )
        ]
    found = f.session is not None or f.header is not None
    workers = f.ctx.settings.workers.enabled  # without a broker no turn waits in a queue
    wanted = [c for c in CHECKS if (found or c[0] in NOT_FOUND_CHECKS) and (workers or c[0] != "worker_queue")]
    return list(_each(f, wanted))


def _each(f: SessionFacts, checks: list[tuple[str, CheckFn]]) -> Iterator[Check]:
    for name, fn in checks:
        try:
            yield fn(f)
        except NeedsGraph:
            raise  # not the session's data: the caller asks LangGraph (`agent.doctor.light`)
        except Exception as err:  # damaged data the check did not foresee is still a finding
            yield finding(
                name,
                "FAIL",
                f"the check failed on the session's data: {type(err).__name__}: {err}",
                "the data this check reads is damaged; restore the session folder from a backup",
            )
