"""The record store is the one engine: every client of a session opens it through the store.

The event log, the tool journal and the inbox of a session are thin clients of the store's
`SessionStreams`; the store owns group commit (on `files` every client of a session shares the
session's commit group; on PostgreSQL each commit is durable on its own and there is none), and
its clients ask for durability only through the session (`hold`, `release`, `commit`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from agent.core.events import SESSION_EVENTS
from agent.session.inbox import Inbox
from agent.tools.journal import ToolExecutionJournal
from checkpointing.entry_log import EventLog
from checkpointing.store.base import EVENTS, JOURNAL
from tests.support.savers import SaverKit

TENANT = "acme"
ROOT = Path(__file__).resolve().parents[4]


def _clients(kit: SaverKit) -> tuple[EventLog, ToolExecutionJournal, Inbox]:
    store = kit.store()
    events = EventLog.over(store.session(TENANT, "s1", "batch"), store.blobs, fsync="batch", schema=SESSION_EVENTS)
    journal = ToolExecutionJournal.over(store.session(TENANT, "s1", "batch"), store.blobs, fsync="batch")
    inbox = Inbox.over(store.session(TENANT, "s1", "always"))
    return events, journal, inbox


def test_every_client_of_a_session_shares_the_commit_group_the_store_gives(saver_kit: SaverKit) -> None:
    events, journal, inbox = _clients(saver_kit)
    groups = {id(events.streams.group), id(journal.streams.group), id(inbox.streams.group)}
    if saver_kit.kind == "postgres":
        assert events.streams.group is None and journal.streams.group is None  # each commit is durable
        return
    assert len(groups) == 1 and events.streams.group is not None
    other = saver_kit.store().session(TENANT, "s2", "batch").group
    assert other is not events.streams.group  # one group per session, never one for all


def test_a_step_commit_makes_the_events_durable_and_leaves_the_journal_to_the_release(tmp_path: Path) -> None:
    kit = SaverKit("files", tmp_path / "state")
    events, journal, _ = _clients(kit)
    group = events.streams.group
    assert group is not None
    events.streams.hold()
    try:
        assert journal.streams.held  # one hold covers every client of the session
        events.create({"tenant_id": TENANT, "session_id": "s1", "user_id": "u", "agent_id": "a", "created_at": "x"})
        events.append("run_start", {"run_id": "r1"})
        journal.record_completed("r1", "call-1", "ok")
        assert {events.path, journal.path} <= set(group.dirty())
        events.commit()
        assert events.path not in group.dirty() and journal.path in group.dirty()
    finally:
        events.streams.release()
    assert group.dirty() == [] and not events.streams.held


def test_every_store_answers_hold_release_and_commit(saver_kit: SaverKit) -> None:
    """The one durability operation of a session, on both backends: a commit returns with the
    stream durable and readable by a new reader; a hold on PostgreSQL defers nothing."""
    events, journal, _ = _clients(saver_kit)
    events.streams.hold()
    try:
        events.create({"tenant_id": TENANT, "session_id": "s1", "user_id": "u", "agent_id": "a", "created_at": "x"})
        events.append("run_start", {"run_id": "r1"})
        journal.record_completed("r1", "call-1", "ok")
        events.streams.commit(EVENTS)
        journal.streams.commit(JOURNAL)
        assert events.streams.held is (saver_kit.kind == "files")
    finally:
        events.streams.release()
    store = saver_kit.store()
    again = EventLog.over(store.session(TENANT, "s1", "batch"), store.blobs, schema=SESSION_EVENTS)
    assert [e.type for e in again.entries()] == ["run_start"]
    journal_again = ToolExecutionJournal.over(store.session(TENANT, "s1", "batch"), store.blobs)
    assert [r["kind"] for r in journal_again.entries()] == ["completed"]


def test_an_inbox_append_is_durable_on_return_while_a_run_holds_the_group(tmp_path: Path) -> None:
    kit = SaverKit("files", tmp_path / "state")
    _, _, inbox = _clients(kit)
    group = inbox.streams.group
    assert group is not None
    group.hold()  # a run of the session in this process (e.g. `agentrt serve`) holds it
    try:
        inbox.submit("a decision arrives mid-run", "t-1", "u1")
        assert inbox.path not in group.dirty()
    finally:
        group.release()
    assert [t.text for t in Inbox(kit.base, TENANT, "s1").turns()] == ["a decision arrives mid-run"]


def test_the_clients_never_reach_past_the_store() -> None:
    """A client of the session's records names no backend: no file locks, no fence file, no
    folder's commit group, no branch on which store is configured."""
    clients = [
        "agent/session/inbox.py",
        "agent/session/chat_memory.py",
        "agent/runner/turns.py",
        "agent/runner/builder.py",
        "agent/runner/routing.py",
        "agent/runner/submit.py",
    ]
    banned = {"fcntl", "FencingGuard", "group_for", "pg_store", "PostgresSessionStreams", "JsonlSessionStore.commit"}
    banned |= {"CommitGroup", "TIER_STATE", "TIER_EVENTS", "TIER_LAZY"}
    found: dict[str, set[str]] = {}
    for rel in clients:
        tree = ast.parse((ROOT / rel).read_text())
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {a.name for a in node.names}
        if names & banned:
            found[rel] = names & banned
    assert found == {}


def test_only_the_store_holds_a_commit_group() -> None:
    """Group commit is the store's: no module outside `checkpointing` imports a commit group or a
    tier, reaches a session's group, or calls a barrier; its clients ask `SessionStreams.commit`."""
    owned = {"CommitGroup", "TIER_STATE", "TIER_EVENTS", "TIER_LAZY", "group_for"}
    found: list[str] = []
    for package in ("agent", "graph", "nodes"):
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "checkpointing.commit_group":
                    found.append(f"{where} imports checkpointing.commit_group")
                elif isinstance(node, ast.ImportFrom) and {a.name for a in node.names} & owned:
                    found.append(f"{where} imports {sorted({a.name for a in node.names} & owned)}")
                elif isinstance(node, ast.Call) and _named(node.func, "barrier"):
                    found.append(f"{where}:{node.lineno} calls .barrier(")
                elif isinstance(node, ast.Attribute) and node.attr == "group" and _named(node.value, "streams"):
                    found.append(f"{where}:{node.lineno} reaches .streams.group")
    assert found == []


def _named(node: ast.expr, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr
