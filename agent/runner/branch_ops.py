"""The branches of a session as a user handles them: list, switch, rename, delete, each under the lease.

A branch is named by its id or by the name `rename` gave it. `switch` moves the session's current
branch (the next turn continues that branch's leaf, room and checkpoints); `delete` takes a branch
out of every listing while its entries stay in events.jsonl as history, removes its room and
unpins its fork point, so retention may reclaim its checkpoints.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.core.errors import Conflict, InputError, quote_id
from agent.runner.branches import fork_point_of, room_id, set_room
from agent.runner.turns import SessionHold
from agent.runner.unfinished import refuse_unfinished
from agent.session.branch_book import DELETED, RENAMED, BranchBook, read_book
from agent.session.lifecycle import SessionAction, transition
from agent.session.session import MAIN_BRANCH, ChatSession
from agent.session.stores.jsonl import page_messages
from checkpointing.entry_log import EventLog
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner


def branches(rt: Runner, session_id: str, tenant_id: str | None, user_id: str | None) -> list[dict[str, Any]]:
    """Every live branch, main first: id, name, fork point, head entry, own turns, whether current."""
    tenant, user, sid = rt.ids(session_id, tenant_id, user_id)
    session = rt.manager.get(tenant, sid, user)
    events = rt.manager.event_log(tenant, sid)
    return listing(session, events, read_book(events))


def listing(session: ChatSession, events: EventLog, book: BranchBook) -> list[dict[str, Any]]:
    """The rows of `branches` (only envelopes and each branch's first entry are read)."""
    stats = events.branch_stats()
    turns: dict[str, int] = {}
    for env in events.envelopes():
        if env["type"] == "user_turn":
            turns[env["branch_id"]] = turns.get(env["branch_id"], 0) + 1
    rows = []
    for branch in sorted(book.live, key=lambda b: (b != MAIN_BRANCH, b)):  # ids are time-ordered UUIDs
        first = events.entry(stats[branch][0])
        created = first.payload if first.type == "branch_created" else {}
        start = created.get("from_entry_id")  # the branch the fork entry is on (the payload's may differ)
        rows.append(
            {
                "branch_id": branch,
                "name": book.name_of(branch),
                "from_entry_id": start,
                "from_branch_id": events.envelope(start)["branch_id"] if start and events.has(start) else None,
                "head_entry_id": book.live[branch],
                "turns": turns.get(branch, 0),
                "entries": stats[branch][1],
                "room_id": room_id(branch),
                "status": "live",
                "current": branch == session.current_branch_id,
            }
        )
    return rows


@dataclass(frozen=True)
class _Held:
    """A session as a branch operation reads it under the session's lease, and its branch."""

    session: ChatSession
    events: EventLog
    book: BranchBook
    target: str
    """The branch the operation names, resolved (an id)."""
    token: int | None
    """The lease's fencing token, for the entries the operation records."""


@contextmanager
def _held(rt: Runner, session_id: str, branch: str, tenant_id: str | None, user_id: str | None) -> Iterator[_Held]:
    """The session read under its lease (`LeaseHeld` while a run is going), `branch` resolved; an
    unknown session or branch fails before the lease is taken."""
    tenant, user, sid = rt.ids(session_id, tenant_id, user_id)
    rt.manager.get(tenant, sid, user)
    read_book(rt.manager.event_log(tenant, sid)).resolve(sid, branch)
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:
        session = rt.manager.get(tenant, sid, user)
        events = rt.manager.event_log(tenant, sid)
        book = read_book(events)
        yield _Held(session, events, book, book.resolve(sid, branch), hold.token)


def switch(rt: Runner, session_id: str, branch: str, tenant_id: str | None, user_id: str | None) -> dict[str, Any]:
    """Make `branch` (id or name) the current one: the next turn continues its leaf, room and checkpoints."""
    with _held(rt, session_id, branch, tenant_id, user_id) as held:
        session, events, book, target = held.session, held.events, held.book, held.target
        session.refresh_status()
        transition(session.model_copy(), SessionAction.SWITCH)  # PAUSED, ENDED, EXPIRED: refused
        refuse_unfinished(rt, session)  # a run left a step on the current branch: resume it first
        came_from = session.current_branch_id
        if target != came_from:
            session.current_branch_id = target
            session.current_leaf_entry_id = book.live[target]
            # On the branch switched to, so a session rebuilt from the log alone lands there too.
            rt.manager.memory.record(
                session, "branch_switched", {"branch_id": target, "from_branch_id": came_from}, held.token
            )
            session.messages = page_messages(events, session.current_leaf_entry_id)
            context = {k: v for k, v in session.context.items() if k != "fork_checkpoint_id"}
            point = fork_point_of(events, target)
            session.context = {**context, "fork_checkpoint_id": point} if point else context
            # The run of the branch left (finished: checked above) stays that branch's.
            session.last_run_id = None
            session.last_run_status = None
            set_room(session)
            rt.manager.save(session)
        return _said(session, target, book.name_of(target), from_branch_id=came_from)


def rename(
    rt: Runner, session_id: str, branch: str, name: str, tenant_id: str | None, user_id: str | None
) -> dict[str, Any]:
    """Give `branch` (id or name) the name `name`: an id-like word, unique among the session's branches."""
    try:
        validate_id(name, "branch name")
    except InvalidIdError as err:
        raise InputError(f"{err}; e.g. `east-only`") from None
    with _held(rt, session_id, branch, tenant_id, user_id) as held:
        session, events, book, target, sid = held.session, held.events, held.book, held.target, held.session.session_id
        taken = book.find(name)
        if (taken is not None and taken != target) or (name in events.branches() and name != target):
            raise Conflict(
                f"branch name {quote_id(name)} is taken in session {sid}; choose another "
                f"(`agentrt branches {sid}` lists the names)"
            )
        if book.name_of(target) != name:
            payload = {"branch_id": target, "name": name, "old_name": book.name_of(target)}
            rt.manager.memory.record(session, RENAMED, payload, held.token)
            rt.manager.save(session)
        return _said(session, target, name)


def delete(rt: Runner, session_id: str, branch: str, tenant_id: str | None, user_id: str | None) -> dict[str, Any]:
    """Take `branch` (id or name) out of every listing; its entries stay. Not main, not the current one."""
    with _held(rt, session_id, branch, tenant_id, user_id) as held:
        session, events, book, target = held.session, held.events, held.book, held.target
        tenant, sid = session.tenant_id, session.session_id
        if target == MAIN_BRANCH:
            raise Conflict(f"branch main is the root of session {sid} and cannot be deleted")
        if target == session.current_branch_id:
            raise Conflict(
                f"branch {quote_id(branch)} is the current branch of session {sid}; switch to another first "
                f"(`agentrt switch {sid} main`), then delete it"
            )
        name = book.name_of(target)
        payload = {"branch_id": target, "name": name, "leaf_entry_id": book.live[target]}
        rt.manager.memory.record(session, DELETED, payload, held.token)
        room = rt.builder.room_dir(tenant, sid, target)
        if room.exists():  # only a run of the current branch works in a room, and none runs (the lease)
            shutil.rmtree(room)
            gone = {"room_id": room_id(target), "branch_id": target, "reason": "branch deleted"}
            rt.manager.memory.record(session, "sandbox_destroyed", gone, held.token)
        _unpin(rt, session, events, target, set(book.live) - {target})
        rt.manager.save(session)
        return _said(session, target, name)


def _unpin(rt: Runner, session: ChatSession, events: EventLog, branch: str, others: set[str]) -> None:
    """Let retention drop the deleted branch's fork point, unless a live branch starts there too."""
    unpin = getattr(rt.saver, "unpin", None)
    point = fork_point_of(events, branch)
    if unpin is None or point is None or point in {fork_point_of(events, b) for b in others}:
        return
    unpin({"configurable": {"thread_id": session.session_id, "tenant_id": session.tenant_id, "checkpoint_id": point}})


def _said(session: ChatSession, branch: str, name: str | None, **more: Any) -> dict[str, Any]:
    return {
        "session_id": session.session_id,
        "branch_id": branch,
        "name": name,
        "current_branch_id": session.current_branch_id,
        "room_id": session.room_id,
        "status": session.status.value,
        **more,
    }
