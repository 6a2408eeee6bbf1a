"""Pause, end and fork as session operations, each under the session lease."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from agent.core.errors import ConfigError, InputError, NotFound, quote_id
from agent.runner.branches import room_id, set_room
from agent.runner.turns import SessionHold
from agent.session.session import ChatSession
from agent.tools.sandbox.room import Sandbox
from checkpointing.entry_log import Entry, EventLog
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id
from checkpointing.layout import room_making_dir

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner


ROLLED_BACK_BRANCH = "rolled_back_branch"
"""The key of a rollback's `branch_created` entry naming the branch it left (the run's entries stay there)."""
TOOL_STEP = "acting"
"""The graph node that runs the model's tool calls (`graph.build`): a checkpoint before it holds calls
that have no result yet."""


def pause(rt: Runner, session_id: str, tenant_id: str | None, user_id: str | None) -> ChatSession:
    """Mark the session PAUSED: plain turns are refused until `resume` (or end + fork)."""
    tenant, user, sid = rt.ids(session_id, tenant_id, user_id)
    rt.manager.get(tenant, sid, user)  # SessionNotFound before the lease: a failed pause leaves nothing
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:  # LeaseHeld while a run is going
        session = rt.manager.pause(tenant, sid, user)
        rt.manager.memory.record(session, "run_pause", {"reason": "paused by the user"}, fencing_token=hold.token)
        return rt.manager.save(session)


def end(rt: Runner, session_id: str, tenant_id: str | None, user_id: str | None) -> ChatSession:
    """Mark the session ENDED (no new turns; forking a branch reopens it); rooms per `session.room_on_end`."""
    tenant, user, sid = rt.ids(session_id, tenant_id, user_id)
    rt.manager.get(tenant, sid, user)  # SessionNotFound before the lease: a failed end leaves nothing
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:
        session = rt.manager.end(tenant, sid, user)
        rt.manager.memory.record(session, "run_end", {"session_ended": True}, fencing_token=hold.token)
        if rt.settings.session.room_on_end == "delete":
            remove_rooms(rt, session, hold.token, "session ended (session.room_on_end: delete)")
        return rt.manager.save(session)


def fork(
    rt: Runner,
    session_id: str,
    from_entry_id: str,
    tenant_id: str | None,
    user_id: str | None,
    reason: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Start a branch at an earlier entry; the next turn continues from that entry's checkpoint
    (`reason` and `extra` go into the branch's `branch_created` entry)."""
    tenant, user, sid = rt.ids(session_id, tenant_id, user_id)
    try:
        validate_id(from_entry_id, "entry id")
    except InvalidIdError as err:
        raise InputError(str(err)) from None
    # Both checked before the lease: a fork refused for an unknown session or entry leaves nothing.
    rt.manager.get(tenant, sid, user)
    _entry_of(rt, tenant, sid, from_entry_id)
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:  # not while a run is going
        session = rt.manager.get(tenant, sid, user)
        events = _entry_of(rt, tenant, sid, from_entry_id)
        checkpoint_id = fork_checkpoint(events.path_to_root(from_entry_id, types=frozenset({"node_end"})))
        if checkpoint_id is None:
            raise ConfigError(
                f"entry {from_entry_id} comes before the session's first checkpoint, so there is no state to branch "
                "from: fork from a later entry, or start a new session"
            )
        fork_config: RunnableConfig = {
            "configurable": {"thread_id": sid, "tenant_id": tenant, "checkpoint_id": checkpoint_id}
        }
        pin = getattr(rt.saver, "pin", None)
        if pin is not None:  # before the branch exists: its fork point must outlive retention
            pin(fork_config)
        manifest = dict(rt.graph.get_state(fork_config).values.get("sandbox_manifest") or {})
        made = {**(extra or {}), "checkpoint_id": checkpoint_id}
        branch_id = rt.manager.fork(session, from_entry_id, reason, extra=made)
        start_branch_at(rt, session, branch_id, checkpoint_id, manifest, hold.token)
        return {
            "session_id": sid,
            "branch_id": branch_id,
            "from_entry_id": from_entry_id,
            "checkpoint_id": checkpoint_id,
            "room_id": session.room_id,
            "status": session.status.value,
        }


def fork_before_run(rt: Runner, tenant_id: str, session_id: str, run_id: str) -> bool | None:
    """Move the session back to just before run `run_id` began: fork at the entry before its
    `run_start` (the run's entries stay on the branch left, which the new branch's `branch_created`
    entry names as `rolled_back_branch`). True when forked; False when there is no state before the
    run to go back to (the session's first turn); None when the run is unknown. The caller knows
    the run has let go of the session."""
    events = rt.manager.event_log(tenant_id, session_id)
    start = events.newest(frozenset({"run_start"}), {"run_id": run_id})
    if start is None:
        return None
    before = start.parent_id
    if before is None or fork_checkpoint(events.path_to_root(before, types=frozenset({"node_end"}))) is None:
        return False
    left = {"rolled_back_run_id": run_id, ROLLED_BACK_BRANCH: events.envelope(before)["branch_id"]}
    fork(rt, session_id, before, tenant_id, None, reason="run rolled back", extra=left)
    return True


def start_branch_at(
    rt: Runner,
    session: ChatSession,
    branch_id: str,
    checkpoint_id: str,
    manifest: dict[str, str],
    token: int | None,
) -> None:
    """Make the just-forked `branch_id` current from `checkpoint_id`: its fork point, no run carried
    over, its room made from `manifest`; saved (the caller holds the session's lease)."""
    points = dict(session.context.get("fork_points") or {})
    points[branch_id] = checkpoint_id
    session.context = {**session.context, "fork_checkpoint_id": checkpoint_id, "fork_points": points}
    # The run that was going on the branch forked from (paused, failed, lost) belongs to that
    # branch: it is never resumed onto this one.
    session.last_run_id = None
    session.last_run_status = None
    set_room(session)
    rt.manager.save(session)
    make_room(rt, session, manifest, checkpoint_id, token)
    rt.manager.save(session)


def _entry_of(rt: Runner, tenant: str, sid: str, entry_id: str) -> EventLog:
    """The session's event log, which holds `entry_id` (`NotFound` otherwise)."""
    events = rt.manager.event_log(tenant, sid)
    if not events.has(entry_id):
        raise NotFound(f"entry {quote_id(entry_id)} is not in session {sid}; `agentrt show {sid}` lists the entry ids")
    return events


def fork_checkpoint(path: Iterable[Entry]) -> str | None:
    """The checkpoint a fork from an entry starts at, given the entry's path to the root (nearest
    first): the newest node end with a checkpoint on it whose tool calls all have their results.

    An entry inside a tool step (the model's request for tools, a call, a result, an approval) forks
    from the state before that request: a branch never starts with a tool call that has no result
    (the model would reject the next turn's history). A node end whose next node is `acting` holds
    such calls. None: the entry comes before the session's first checkpoint, and `fork` refuses it.
    """
    for entry in path:
        payload = entry.payload or {}
        checkpoint_id = payload.get("checkpoint_id") if entry.type == "node_end" else None
        if checkpoint_id and TOOL_STEP not in (payload.get("next") or ()):
            return str(checkpoint_id)
    return None


def forkable_entries(history: Sequence[Entry]) -> set[str]:
    """The entries of a branch history (root first) that `fork` accepts: each one whose path to the
    root has a checkpoint (`fork_checkpoint`), so every entry from the first checkpointed node end on."""
    start = next((i for i, e in enumerate(history) if fork_checkpoint([e]) is not None), len(history))
    return {e.id for e in history[start:]}


def make_room(
    rt: Runner, session: ChatSession, manifest: dict[str, str], checkpoint_id: str, token: int | None
) -> None:
    """Make the current branch's room: the fork point's files, written aside and renamed into place.

    A process killed before the rename leaves no room, and the branch's first turn fills it from
    the same checkpoint (`RuntimeBuilder.sandbox`), so the room is never half made.
    """
    tenant, sid, branch = session.tenant_id, session.session_id, session.current_branch_id
    room = rt.builder.room_dir(tenant, sid, branch)
    if room.exists():
        return
    tmp = room_making_dir(room)
    shutil.rmtree(tmp, ignore_errors=True)
    sandbox = Sandbox(tmp, blobs=rt.blobs)
    if manifest:
        sandbox.restore(manifest)
    os.replace(tmp, room)
    payload = {"room_id": room_id(branch), "branch_id": branch, "files": len(manifest), "checkpoint_id": checkpoint_id}
    rt.manager.memory.record(session, "sandbox_created", payload, fencing_token=token)


def remove_rooms(rt: Runner, session: ChatSession, token: int | None, reason: str) -> None:
    """Delete every sandbox room of the session, one `sandbox_destroyed` entry each."""
    events = rt.manager.event_log(session.tenant_id, session.session_id)
    for branch in sorted(events.branches()):
        room = rt.builder.room_dir(session.tenant_id, session.session_id, branch)
        if not room.exists():
            continue
        shutil.rmtree(room)
        payload = {"room_id": room_id(branch), "branch_id": branch, "reason": reason}
        rt.manager.memory.record(session, "sandbox_destroyed", payload, fencing_token=token)
