"""`agentrt doctor ID --repair`: what the doctor may change, under the session lease.

Built on the record store's operations `SessionStreams.verify()` / `SessionStreams.repair(report)`,
which both stores answer and which keep every record that verifies (files: `checkpointing.verify`;
PostgreSQL: `checkpointing.store.verify_ops`, where a damaged last row with no intact row after it
is cut, its bytes kept in the document `<file>.broken`, and a session whose last entry was cut is
saved again with its branch's last intact entry as its leaf). On files:
- a torn tail (a log's last line without its newline: a crash mid-append) is skipped by every
  read and cut by the next append anyway; `--repair` cuts it now (the bytes move to
  `<file>.broken`, logged);
- a damaged `session.json` is moved aside to `session.json.broken`: the next read takes the
  session from its other copy (SQL) or rebuilds it from the event log;
- a damaged `fence.json` is rewritten above every fencing token the session's records carry and
  the lease's token counter, so no earlier holder can write again;
- a damaged `pins.json` (the checkpoints retention must keep) is moved aside to
  `pins.json.broken`, and every branch's fork point (its `branch_created` entry in the event log,
  and the session's `fork_points`) is pinned again through the saver's `pin`;
- a damaged persisted index (`<log>.idx`) is removed (the next append writes a new one);
- a missing, damaged or incomplete index of sessions is rebuilt from the session folders, and a
  missing or stale row of this session is written again (`agent.doctor.index`);
- a damaged outbox (`outbox.jsonl`: its torn tail is an unreadable debt, a bad line stops every
  read of the session) is replaced by one debt of every kind to every layer (`Outbox.repair`:
  the old bytes move to `outbox.jsonl.broken`, logged), so the next read replays every layer
  from the source of truth;
- what the outbox says the SQL / Redis layers missed is replayed now (when they answer).

The lease is taken first, so a live writer's half-written append is never mistaken for a crash:
while someone holds the session, nothing is touched (`LeaseHeld`). A complete record that does
not verify inside a log (or a damaged row followed by intact ones) is left as it is (the doctor's
`files` check names it: restore a backup).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.core.errors import AgentrtError, DataCorrupt
from agent.session.record_store import session_streams
from checkpointing import records
from checkpointing.exceptions import CorruptRecordError, OldFormatError
from checkpointing.layout import (
    BROKEN_SUFFIX,
    EVENTS_FILE,
    OUTBOX_FILE,
    PINS_FILE,
    broken_file,
    lease_files,
    pins_file,
)
from checkpointing.store.base import EVENTS, SessionStreams
from checkpointing.store.files import FileSessionStreams

if TYPE_CHECKING:
    from pathlib import Path

    from agent.runner.agent_runner import AgentRunner

__all__ = ["fork_points", "repair_session", "repair_torn_tails", "repin_fork_points", "session_streams_of"]


def session_streams_of(runner: AgentRunner, tenant: str, session_id: str) -> SessionStreams:
    """The session on the runner's record store: its rows on PostgreSQL, else its folder."""
    return session_streams(runner.settings, tenant, session_id, "batch")


def repair_session(runner: AgentRunner, session_id: str, tenant_id: str | None = None) -> list[tuple[Path, str]]:
    """Every repair `--repair` makes on the session: (file or stream, what was done), one per change."""
    tenant = tenant_id or runner.settings.session.tenant_id
    streams = session_streams_of(runner, tenant, session_id)
    on_files = isinstance(streams, FileSessionStreams)
    if not (streams.dir.is_dir() if isinstance(streams, FileSessionStreams) else streams.has_rows()):  # type: ignore[attr-defined]
        return []  # nothing to repair, and taking the lease would create the folder
    done: list[tuple[Path, str]] = []
    grant = runner.lease.acquire(tenant, session_id, ttl_s=runner.settings.persistence.lease_ttl_s)
    # A rebuilt fence is above every token granted (the PostgreSQL fence is a row: never damaged).
    floor = max(grant.token, _counter(streams.dir)) if isinstance(streams, FileSessionStreams) else grant.token
    try:
        pins_fixed = False
        for report in streams.verify():
            if report.name == OUTBOX_FILE or not report.repairable:
                continue  # the outbox's torn tail stands for debts: `Outbox.repair` below
            fixed = streams.repair(report, floor)
            if fixed is not None:
                done.append((fixed.path, _said(fixed.action, fixed.kept)))
                pins_fixed = pins_fixed or report.name == PINS_FILE
                if report.name == EVENTS_FILE:
                    said = _realign_leaf(runner, tenant, session_id)
                    if said is not None:
                        done.append((fixed.path, said))
        if pins_fixed or _pins_moved_aside(streams):  # now, or by a repair cut short
            points = repin_fork_points(runner, tenant, session_id)
            if points or pins_fixed:
                where = pins_file(streams.dir) if on_files else streams.label.parent / PINS_FILE  # type: ignore[attr-defined]
                done.append((where, f"pinned the fork point of {points} branch(es) again"))
        outbox = runner.manager.outbox
        steps = [x for x in (outbox.repair(tenant, session_id), _replay_outbox(runner, tenant, session_id)) if x]
        if steps:
            done.append((outbox.path(tenant, session_id), "; ".join(steps)))
        said = _repair_index_row(runner, tenant, session_id)
        if said is not None:
            done.append((runner.manager.jsonl.index.path, said))
        return done
    finally:
        runner.lease.release(grant)


def _realign_leaf(runner: AgentRunner, tenant: str, session_id: str) -> str | None:
    """After entries were cut from the event log: a session whose leaf named one of them is saved
    again (every layer) with its branch's last intact entry as the leaf, as a read of the log would
    take it, so the next turn's entry has a parent in the log. What was done, or None."""
    from agent.session.stores.jsonl import page_messages

    manager = runner.manager
    try:
        session = manager.get(tenant, session_id)
    except AgentrtError:  # no readable session document: the next read rebuilds it from the log
        return None
    events = manager.event_log(tenant, session_id)
    leaf = session.current_leaf_entry_id
    if leaf is None or events.has(leaf):
        return None
    new = events.branch_leaf(session.current_branch_id)
    session.current_leaf_entry_id = new
    session.messages = page_messages(events, new)
    manager.save(session)
    return f"the session's last entry {leaf} was cut: it goes on from {new} (saved to every layer)"


def _pins_moved_aside(streams: SessionStreams) -> bool:
    """Whether the pins document is gone and its damaged copy kept (`pins.json.broken`)."""
    if isinstance(streams, FileSessionStreams):
        pins = pins_file(streams.dir)
        return not pins.exists() and broken_file(pins).exists()
    from checkpointing.store.verify_ops import has_doc

    return not has_doc(streams, PINS_FILE) and has_doc(streams, PINS_FILE + BROKEN_SUFFIX)  # type: ignore[arg-type]


def _replay_outbox(runner: AgentRunner, tenant: str, session_id: str) -> str | None:
    """Replay now what the SQL / Redis layers missed (the outbox's debts); what was done, or None."""
    manager = runner.manager
    before = manager.behind(tenant, session_id)
    if not before:
        return None
    manager.converge([(tenant, session_id)])
    after = manager.behind(tenant, session_id)
    here = manager.layer_status()
    paid = [f"{layer} ({lag.changes} change(s))" for layer, lag in before.items() if layer not in after]
    said = [f"replayed what {', '.join(paid)} missed"] if paid else []
    for layer, lag in after.items():
        if layer in here:
            said.append(f"{layer} still does not answer: {lag.changes} change(s) stay owed and replay when it does")
        else:
            said.append(f"{layer} is not configured here: its {lag.changes} change(s) wait for a process that has it")
    return "; ".join(said) or None


def _repair_index_row(runner: AgentRunner, tenant: str, session_id: str) -> str | None:
    """Rebuild an unusable session index, or rewrite this session's row when it is missing or stale."""
    from agent.doctor.index import index_check, repair_index

    check = index_check(runner, tenant, session_id)
    if check.status == "FAIL":
        return repair_index(runner)
    if check.status == "WARN":
        store = runner.manager.jsonl
        session = store.get(tenant, session_id) or store.rebuild(tenant, session_id)
        if session is not None:
            store.index_session(session)
            return f"rewrote the session's row in the session index (version {session.version})"
    return None


def fork_points(runner: AgentRunner, tenant: str, session_id: str) -> set[str]:
    """The checkpoint ids every branch of the session was forked from: the `checkpoint_id` of each
    intact `branch_created` entry of the event log, and the session's own `fork_points`."""
    streams = session_streams_of(runner, tenant, session_id)
    try:
        found = streams.scan(EVENTS)
    except (CorruptRecordError, OldFormatError) as err:
        if not isinstance(streams, FileSessionStreams):
            found = records.Scan(streams.path(EVENTS))  # the session's own fork_points below
        else:
            found = records.scan_before(streams.path(EVENTS), err.line)  # the intact entries before the damage
    points: set[str] = set()
    for _, body in found.records:
        rec = records.loads(body)
        cp = (rec.get("payload") or {}).get("checkpoint_id") if rec.get("type") == "branch_created" else None
        if isinstance(cp, str) and cp:
            points.add(cp)
    try:
        session = runner.manager.get(tenant, session_id)
    except AgentrtError:  # evidence only: the event log holds every fork point the session has
        return points
    known = session.context.get("fork_points")
    if isinstance(known, dict):
        points.update(str(cp) for cp in known.values() if cp)
    return points


def repin_fork_points(runner: AgentRunner, tenant: str, session_id: str) -> int:
    """Pin every fork point of the session through the saver (`fork_points`); how many."""
    pin = getattr(runner.saver, "pin", None)
    points = sorted(fork_points(runner, tenant, session_id))
    if pin is None:
        return 0
    for cp in points:
        pin({"configurable": {"thread_id": session_id, "tenant_id": tenant, "checkpoint_id": cp}})
    return len(points)


def _said(action: str, kept: Path | None) -> str:
    return f"{action} (kept in {kept.name})" if kept is not None else action


def _counter(directory: Path) -> int:
    """The file lease's token counter, a floor for a rebuilt fence (0 when unreadable)."""
    from agent.session.lease_file import read_token_counter

    try:
        return read_token_counter(lease_files(directory).token)
    except DataCorrupt:
        return 0


def repair_torn_tails(runner: AgentRunner, session_id: str, tenant_id: str | None = None) -> list[Path]:
    """`repair_session`, returning only the files it changed."""
    return [path for path, _ in repair_session(runner, session_id, tenant_id)]
