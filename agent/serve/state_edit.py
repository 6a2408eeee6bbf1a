"""Editing a thread's state (`POST /threads/{id}/state`) as agentrt keeps history: the edit forks.

agentrt never rewrites a branch, so an edit starts a new branch of the session's entry tree (what
`agentrt fork` does: `branch_created`, the fork point pinned, the branch's room) at the entry of the
base checkpoint (the one given, else the current head), writes the new values as a checkpoint on top
of it with LangGraph's own `update_state`, and makes that checkpoint the branch's fork point: the
thread's state and its next run continue from the edit, while the branch it came from keeps every
checkpoint and entry as they were.

A run from an earlier checkpoint (a run's `checkpoint` / `checkpoint_id`: Studio's "rerun from
here", agent-chat-ui's edit of a message) forks the same way, without writing anything: the new
branch starts at that checkpoint (on any branch of the thread) and the run goes on from there.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.errors import InvalidUpdateError
from langgraph.types import StateSnapshot

from agent.core.errors import ConfigError, SessionError, SessionNotFound
from agent.runner.run_lifecycle import start_branch_at
from agent.runner.turns import SessionHold
from agent.serve.serve_context import ServeContext
from agent.session.session import ChatSession
from checkpointing.entry_log import EventLog

NODE_END = frozenset({"node_end"})


def edit_state(
    ctx: ServeContext, session: ChatSession, values: Any, as_node: str | None, checkpoint_id: str | None
) -> dict[str, Any]:
    """Fork the thread at `checkpoint_id` (else its head) with `values` written as `as_node` did;
    the new checkpoint's config, as `{"checkpoint": {...}}`."""
    rt = ctx.runner
    tenant, sid = session.tenant_id, session.session_id
    if as_node is not None and as_node not in rt.graph.nodes:
        raise ConfigError(f"as_node {as_node!r} is not a node of the graph; one of {sorted(rt.graph.nodes)}")
    _check_values(ctx, values)
    _refuse_busy(ctx, session)
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:  # LeaseHeld (409) while a run is going
        _refuse_busy(ctx, session)
        session = rt.manager.get(tenant, sid, session.user_id)
        base = _base(ctx, session, checkpoint_id)
        base_cp = str(base.config["configurable"]["checkpoint_id"])
        events = rt.manager.event_log(tenant, sid)
        entry_id = _entry_at(ctx, session, events, base)
        pin = getattr(rt.saver, "pin", None)
        if pin is not None:  # the base outlives retention while the new branch starts from it
            pin(_at(session, base_cp))
        branch_id = rt.manager.fork(session, entry_id, reason="state edited", extra={"checkpoint_id": base_cp})
        config: RunnableConfig = {"configurable": {**_at(session, base_cp)["configurable"], "branch_id": branch_id}}
        try:
            written = rt.graph.update_state(config, values, as_node=as_node)
        except InvalidUpdateError as err:
            raise ConfigError(f"the state update was refused: {err}") from None
        new_cp = str(written["configurable"]["checkpoint_id"])
        if pin is not None:
            pin(_at(session, new_cp))
        manifest = dict(rt.graph.get_state(_at(session, new_cp)).values.get("sandbox_manifest") or {})
        start_branch_at(rt.runner, session, branch_id, new_cp, manifest, hold.token)
    conf = written["configurable"]
    return {
        "checkpoint": {
            "thread_id": sid,
            "checkpoint_ns": conf.get("checkpoint_ns", ""),
            "checkpoint_id": new_cp,
        }
    }


def fork_at(ctx: ServeContext, session: ChatSession, checkpoint_id: str) -> str:
    """Start a new branch at `checkpoint_id` of the current branch, as `agentrt fork` does, and make
    it current: the thread's state and its next run continue from that checkpoint, the branch it came
    from keeps every checkpoint and entry as they were. The new branch's id."""
    _refuse_busy(ctx, session)
    return _fork(ctx, session.tenant_id, session.session_id, session.user_id, checkpoint_id, "forked", busy=session)


def run_fork_point(ctx: ServeContext, session: ChatSession, checkpoint_id: str) -> str | None:
    """The checkpoint a run asking to start at `checkpoint_id` forks at: None when it is the thread's
    head (the run just goes on); `SessionNotFound` when the thread has no such checkpoint."""
    head = ctx.snapshot(session)
    if head.config["configurable"].get("checkpoint_id") == checkpoint_id:
        return None
    if ctx.snapshot(session, checkpoint_id).metadata is None:
        raise SessionNotFound(f"checkpoint {checkpoint_id} not found in thread {session.session_id}")
    return checkpoint_id


def fork_for_run(ctx: ServeContext, tenant_id: str, thread_id: str, checkpoint_id: str) -> None:
    """Make a new branch starting at `checkpoint_id` the thread's current one (before a run from it)."""
    _fork(ctx, tenant_id, thread_id, None, checkpoint_id, "run from an earlier checkpoint")


def _fork(
    ctx: ServeContext,
    tenant: str,
    sid: str,
    user_id: str | None,
    checkpoint_id: str,
    reason: str,
    busy: ChatSession | None = None,
) -> str:
    """Fork at `checkpoint_id` under the session's lease (`LeaseHeld`, 409, while a run holds it; with
    `busy`, a run the server still has pending or running is refused too) and make the new branch,
    starting from that checkpoint, the current one. The new branch's id."""
    rt = ctx.runner
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:
        if busy is not None:
            _refuse_busy(ctx, busy)
        session = rt.manager.get(tenant, sid, user_id)
        base = _base(ctx, session, checkpoint_id)
        base_cp = str(base.config["configurable"]["checkpoint_id"])
        entry_id = _entry_at(ctx, session, rt.manager.event_log(tenant, sid), base)
        pin = getattr(rt.saver, "pin", None)
        if pin is not None:  # the fork point outlives retention while the new branch starts from it
            pin(_at(session, base_cp))
        branch_id = rt.manager.fork(session, entry_id, reason=reason, extra={"checkpoint_id": base_cp})
        manifest = dict((base.values or {}).get("sandbox_manifest") or {})
        start_branch_at(rt.runner, session, branch_id, base_cp, manifest, hold.token)
    return branch_id


def _check_values(ctx: ServeContext, values: Any) -> None:
    """Refuse (422) what `update_state` would fail on only after the branch is made: keys the state
    does not have, messages that are not messages."""
    channels = {k for k in ctx.runner.graph.channels if not k.startswith("__") and not k.startswith("branch:")}
    unknown = sorted(set(values) - channels)
    if unknown:
        raise ConfigError(
            f"values has keys the state does not have: {unknown}; the state's keys are {sorted(channels)}"
        )
    if "messages" in values:
        msgs = values["messages"]
        try:
            convert_to_messages(msgs if isinstance(msgs, list) else [msgs])
        except (ValueError, TypeError, NotImplementedError) as err:
            raise ConfigError(f"values.messages is not a list of messages: {err}") from None


def _refuse_busy(ctx: ServeContext, session: ChatSession) -> None:
    if ctx.engine.active(session.tenant_id, session.session_id) is not None:
        raise SessionError(f"thread {session.session_id} has a run in flight; edit its state when the run is over")


def _at(session: ChatSession, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": session.session_id,
            "tenant_id": session.tenant_id,
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        }
    }


def _base(ctx: ServeContext, session: ChatSession, checkpoint_id: str | None) -> StateSnapshot:
    """The snapshot the edit starts from: `checkpoint_id` on any branch of the thread, else the head."""
    head = ctx.snapshot(session)
    if head.metadata is None:
        raise SessionError(f"thread {session.session_id} has no state yet; run it once, then edit its state")
    if not checkpoint_id:
        return head
    snap: StateSnapshot | None = head
    while snap is not None and snap.metadata is not None:
        if snap.config["configurable"].get("checkpoint_id") == checkpoint_id:
            return snap
        snap = ctx.parent(session, snap)
    other = ctx.snapshot(session, checkpoint_id)  # on another branch of the thread
    if other.metadata is not None:
        return other
    raise SessionNotFound(f"checkpoint {checkpoint_id} not found in thread {session.session_id}")


def _entry_at(ctx: ServeContext, session: ChatSession, events: EventLog, base: StateSnapshot) -> str:
    """The entry the new branch starts at: the current leaf for the head, else the node end that wrote
    the base checkpoint (or its nearest checkpointed ancestor), on the current branch first."""
    leaf = session.current_leaf_entry_id
    if leaf is None:
        raise SessionError(f"thread {session.session_id} has no entries to branch from; run it once first")
    head = ctx.snapshot(session).config["configurable"].get("checkpoint_id")
    if base.config["configurable"].get("checkpoint_id") == head:
        return leaf
    ends: dict[str, str] = {}
    for entry in events.path_to_root(leaf, types=NODE_END):  # nearest first
        cp = (entry.payload or {}).get("checkpoint_id") if entry.type == "node_end" else None
        if cp and str(cp) not in ends:
            ends[str(cp)] = entry.id
    snap: StateSnapshot | None = base
    while snap is not None and snap.metadata is not None:  # the base first, then its ancestors
        cp = str(snap.config["configurable"].get("checkpoint_id"))
        if cp in ends:
            return ends[cp]
        elsewhere = events.newest(NODE_END, {"checkpoint_id": cp})  # a checkpoint of another branch
        if elsewhere is not None:
            return elsewhere.id
        snap = ctx.parent(session, snap)
    return leaf
