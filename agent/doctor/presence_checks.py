"""The doctor's checks that the session is there: where it is found, whose it is, its header and its files."""

from __future__ import annotations

from typing import Any

from agent.doctor.behind import lag_lines
from agent.doctor.facts import Check, SessionFacts
from agent.doctor.finding import NOTHING, RESTORE_CP, finding
from agent.runner.recovery import (
    OLD_FORMAT,
)
from checkpointing import audit
from checkpointing.entry_log import SCHEMA_VERSION as EVENTS_SCHEMA_VERSION
from checkpointing.layout import OUTBOX_FILE, PINS_FILE, session_file
from checkpointing.verify import FileKind, Health

CACHE_LAYERS = ("L1", "L2")

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
