"""ChatMemory and branches (docs/concepts/entry-tree.md): the page history for display and next-turn input (never
the graph state's `messages`), and the branch cursor (current branch + leaf) over the event tree.

The source is the event log: `user_turn` and `assistant_message` entries on the path from the
session's current leaf to the root (so a fork changes only which history later turns see). The
same messages are kept as rows of the SQL `chat_messages` table when a SQL store is configured;
a SQL write that fails (or is skipped while SQL is known down) is logged once per outage and
reported to `on_sql_missed` (the manager records it in the session's durable outbox); `sync_all_sql`
repairs it from the event log (rows are keyed by entry id, so re-syncing never duplicates).

Recording an event: `record` appends the entry through the session's event log
(`JsonlSessionStore.event_log`: the session's handle, `checkpointing.entry_log.EventLog.append`)
and, unless deferred, commits it (`EventLog.commit`, which asks the store for durability); a
run's deferred entries are committed by `commit`, once per step (`agent.runner.turns.EventRecorder`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agent.core.errors import BackendUnavailable, NotFound, quote_id
from agent.session.lifecycle import SessionAction, allowed, transition
from agent.session.session import ChatSession, PageMessage
from agent.session.stores.jsonl import PAGE_TYPES, JsonlSessionStore, page_messages
from checkpointing.digest import redact
from checkpointing.entry_log import Entry, new_entry_id

if TYPE_CHECKING:
    from agent.session.stores.sql import SqlSessionStore

log = logging.getLogger("agentrt.sessions")


class ChatMemory:
    """Page history of a session's current branch, appended as event-log entries (+ SQL rows)."""

    def __init__(
        self,
        jsonl: JsonlSessionStore,
        sql: SqlSessionStore | None = None,
        sql_usable: Callable[[], bool] | None = None,
        on_sql_missed: Callable[[ChatSession], None] | None = None,
    ) -> None:
        self.jsonl = jsonl
        self.sql = sql
        self._sql_usable = sql_usable
        """Asked before each SQL write: the manager says no while it knows SQL is down."""
        self._on_sql_missed = on_sql_missed
        """Told about each page row that did not reach SQL (before the caller goes on)."""
        self._sql_down = False
        self._unsynced: dict[tuple[str, str], list[tuple[ChatSession, PageMessage]]] = {}
        """Page rows of entries written with `defer_commit`: they go to SQL once the entry is durable."""
        self._unsynced_lock = threading.Lock()

    def _append(
        self,
        session: ChatSession,
        kind: str,
        role: str,
        content: str,
        run_id: str | None,
        fencing_token: int | None,
        defer_commit: bool = False,
    ) -> PageMessage:
        payload: dict[str, Any] = {"content": content}
        if run_id is not None:
            payload["run_id"] = run_id
        entry = self.record(session, kind, payload, fencing_token, defer_commit=defer_commit)
        ts = datetime.fromisoformat(entry.ts)
        message = PageMessage(role=role, content=content, entry_id=entry.id, ts=ts)
        session.messages = [*session.messages, message]
        session.touch()
        if defer_commit:
            # SQL is a projection of the log: no row for an entry a machine crash could still lose.
            with self._unsynced_lock:
                self._unsynced.setdefault(session.key(), []).append((session, message))
        else:
            self._write_sql(session, [message])
        return message

    def _flush_rows(self, session: ChatSession) -> None:
        """Write the page rows whose entries the last commit made durable."""
        with self._unsynced_lock:
            rows = self._unsynced.pop(session.key(), [])
        for owner, message in rows:
            self._write_sql(owner, [message])

    def add_user_turn(
        self, session: ChatSession, content: str, run_id: str | None = None, fencing_token: int | None = None
    ) -> PageMessage:
        """Append a `user_turn` entry on the current branch and the page history; the leaf moves to it."""
        return self._append(session, "user_turn", "user", content, run_id, fencing_token)

    def add_assistant_message(
        self,
        session: ChatSession,
        content: str,
        run_id: str | None = None,
        fencing_token: int | None = None,
        *,
        defer_commit: bool = False,
    ) -> PageMessage:
        """Append an `assistant_message` entry (the answer shown on the page); the leaf moves to it.

        With `defer_commit` the entry (and its SQL row) waits for the next commit, e.g. the run's
        closing entry right after it: one fsync for both."""
        return self._append(session, "assistant_message", "assistant", content, run_id, fencing_token, defer_commit)

    def record(
        self,
        session: ChatSession,
        type: str,
        payload: dict[str, Any] | None = None,
        fencing_token: int | None = None,
        *,
        defer_commit: bool = False,
    ) -> Entry:
        """Append an event on the session's current branch (parent: the current leaf); moves the leaf.

        The session is not saved here: save it at the caller's next safe point (meanwhile the log
        is the truth for the leaf, see `JsonlSessionStore.get`). With `defer_commit` the entry is
        written but made durable only by the next `commit` (a run commits once per step).
        """
        events = self.jsonl.event_log(session.tenant_id, session.session_id)
        try:
            entry = events.append(
                type,
                redact(payload) if payload else payload,  # no secret from tool args or decisions lands on disk
                parent_id=session.current_leaf_entry_id,
                branch_id=session.current_branch_id,
                fencing_token=fencing_token,
            )
        except OSError as err:
            raise BackendUnavailable(
                f"event not written to {events.path} ({err}); check that base_dir is writable"
            ) from err
        if not defer_commit:
            events.commit()
        session.current_leaf_entry_id = entry.id
        if not defer_commit:
            self._flush_rows(session)
        return entry

    def commit(self, session: ChatSession) -> None:
        """Make the entries recorded with `defer_commit` durable (one fsync for all of them; while a
        run holds the session, after the checkpoint data of its step: `EventLog.commit`)."""
        events = self.jsonl.event_log(session.tenant_id, session.session_id)
        try:
            events.commit()
        except OSError as err:
            raise BackendUnavailable(
                f"events not synced to {events.path} ({err}); check that base_dir is writable"
            ) from err
        self._flush_rows(session)

    def fork(
        self,
        session: ChatSession,
        from_entry_id: str,
        reason: str | None = None,
        fencing_token: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Start a new branch at `from_entry_id` and return its id; earlier entries are never changed.

        Appends a `branch_created` entry parented to `from_entry_id`, moves the session's current
        branch and leaf to it, reprojects the page history, and reopens an ENDED/EXPIRED session as
        ACTIVE (docs/concepts/lifecycle.md: end, then branch). A PAUSED session must be resumed or ended first. The
        caller saves the session. `extra` goes into the entry's payload (e.g. the `checkpoint_id`
        the LangGraph state of the new branch is forked from).
        """
        sid = session.session_id
        if not allowed(session.status, SessionAction.FORK):
            transition(session, SessionAction.FORK)  # raises the refusal (e.g. PAUSED: resume or end first)
        events = self.jsonl.event_log(session.tenant_id, sid)
        if not events.has(from_entry_id):
            raise NotFound(
                f"entry {quote_id(from_entry_id)} is not in session {sid}; `agentrt show {sid}` lists the entry ids"
            )
        from_branch, from_leaf = session.current_branch_id, session.current_leaf_entry_id
        session.current_branch_id = new_entry_id()
        session.current_leaf_entry_id = from_entry_id
        try:
            entry = self.record(
                session,
                "branch_created",
                {
                    **(extra or {}),
                    "from_entry_id": from_entry_id,
                    "from_branch_id": from_branch,
                    "from_leaf_entry_id": from_leaf,
                    "reason": reason,
                },
                fencing_token,
            )
        except BaseException:
            session.current_branch_id, session.current_leaf_entry_id = from_branch, from_leaf
            raise
        session.messages = page_messages(events, entry.id)
        transition(session, SessionAction.FORK)  # ENDED / EXPIRED reopen as ACTIVE (end, then branch)
        return session.current_branch_id

    def history(self, session: ChatSession, limit: int | None = None) -> list[PageMessage]:
        """The page history of the session's current branch from the event log, oldest first."""
        events = self.jsonl.event_log(session.tenant_id, session.session_id)
        messages = page_messages(events, session.current_leaf_entry_id)
        return messages[-limit:] if limit else messages

    def sql_history(self, session: ChatSession) -> list[PageMessage]:
        """The same history from the SQL rows (those on the current branch path), oldest first."""
        if self.sql is None:
            return []
        events = self.jsonl.event_log(session.tenant_id, session.session_id)
        order = {e.id: i for i, e in enumerate(events.projection(session.current_leaf_entry_id))}
        rows = [m for _, m in self.sql.messages(session.tenant_id, session.session_id) if m.entry_id in order]
        return sorted(rows, key=lambda m: order[m.entry_id or ""])

    def sync_sql(self, session: ChatSession) -> int:
        """Insert the SQL rows missing for the session, every branch (after an outage); returns rows added."""
        return self.sync_all_sql(session.tenant_id, session.session_id)

    def page_entries(self, tenant_id: str, session_id: str) -> dict[str, list[PageMessage]]:
        """Every page message of the session from the event log, by branch, in log order."""
        by_branch: dict[str, list[PageMessage]] = {}
        for e in self.jsonl.event_log(tenant_id, session_id).entries(frozenset(PAGE_TYPES)):
            role = PAGE_TYPES.get(e.type)
            if role is not None:
                message = PageMessage(
                    role=role, content=str(e.payload.get("content", "")), entry_id=e.id, ts=datetime.fromisoformat(e.ts)
                )
                by_branch.setdefault(e.branch_id, []).append(message)
        return by_branch

    def sync_all_sql(self, tenant_id: str, session_id: str) -> int:
        """Insert every page row of the session that SQL lacks, in log order; returns rows added."""
        if self.sql is None:
            return 0
        return sum(
            self.sql.add_messages(tenant_id, session_id, branch, rows)
            for branch, rows in self.page_entries(tenant_id, session_id).items()
        )

    def sql_behind(self, tenant_id: str, session_id: str) -> bool:
        """Whether SQL holds fewer page rows of the session than the event log (one COUNT query)."""
        if self.sql is None:
            return False
        expected = sum(len(rows) for rows in self.page_entries(tenant_id, session_id).values())
        return self.sql.count_messages(tenant_id, session_id) < expected

    def _write_sql(self, session: ChatSession, messages: list[PageMessage]) -> None:
        if self.sql is None:
            return
        if self._sql_usable is not None and not self._sql_usable():
            self._missed(session)  # replayed from the outbox once SQL answers again
            return
        try:
            self.sql.add_messages(session.tenant_id, session.session_id, session.current_branch_id, messages)
        except BackendUnavailable as err:
            if not self._sql_down:
                log.warning("chat_messages not written to SQL, kept in events.jsonl: %s", err)
            self._sql_down = True
            self._missed(session)
            return
        if self._sql_down:
            self._sql_down = False
            log.info("SQL is reachable again; chat_messages rows resume")
            self.sync_sql(session)

    def _missed(self, session: ChatSession) -> None:
        if self._on_sql_missed is not None:
            self._on_sql_missed(session)
