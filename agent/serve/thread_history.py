"""A thread's history (`threads.get_history`) as LangGraph's server answers it: the states of every
branch of the thread, newest first, each naming its parent, so a client (`useStream` with
`fetchStateHistory`) sees where a run from an earlier checkpoint or a state edit forked and can
show both sides.

The branches shown are the session's live branches (a branch deleted with `agentrt branch delete`
is not), except the branch a rollback left: the rolled-back run's checkpoints stay there for
`agentrt show` but are gone from the API, while the states before that run are still reached from
the branch the rollback made. A thread with one branch is read from its head down its parents only
as far as the page asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from langgraph.types import StateSnapshot

from agent.runner.branches import fork_point_of, head_of
from agent.runner.run_lifecycle import ROLLED_BACK_BRANCH
from agent.serve.encode import thread_state
from agent.session.branch_book import read_book
from agent.session.session import ChatSession

if TYPE_CHECKING:
    from agent.serve.serve_context import ServeContext

BRANCH_CREATED = frozenset({"branch_created"})


def other_heads(ctx: ServeContext, session: ChatSession) -> list[str]:
    """The head checkpoints of the thread's other branches shown in its history (see the module)."""
    events = ctx.runner.manager.event_log(session.tenant_id, session.session_id)
    if not events.exists() or len(events.branch_stats()) <= 1:
        return []
    left = {str(e.payload.get(ROLLED_BACK_BRANCH)) for e in events.entries(BRANCH_CREATED) if e.payload}
    heads = []
    for branch in read_book(events).live:
        if branch == session.current_branch_id or branch in left:
            continue
        at = head_of(ctx.runner.saver, session, branch, fork_point_of(events, branch))
        if at.checkpoint_id is not None:
            heads.append(at.checkpoint_id)
    return heads


def thread_history(
    ctx: ServeContext,
    session: ChatSession,
    limit: int,
    before: str | None,
    checkpoint_id: str | None,
    metadata: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Up to `limit` states, newest first: from `checkpoint_id` down its parents when given, else of
    every branch shown; only those older than `before` and whose metadata holds `metadata`."""
    others = [] if checkpoint_id else other_heads(ctx, session)
    if not others:
        snap: StateSnapshot | None = ctx.snapshot(session, checkpoint_id)
        if before:
            snap = ctx.parent(session, ctx.snapshot(session, before))
        return _page(session, _chain(ctx, session, snap), limit, metadata)
    seen: dict[str, StateSnapshot] = {}
    for start in (None, *others):
        for found in _chain(ctx, session, ctx.snapshot(session, start), seen):
            seen[_id(found)] = found
    ordered = sorted(seen.values(), key=_id, reverse=True)  # checkpoint ids are time-ordered
    if before:
        ordered = [s for s in ordered if _id(s) < before]
    return _page(session, iter(ordered), limit, metadata)


def _chain(
    ctx: ServeContext, session: ChatSession, snap: StateSnapshot | None, stop: dict[str, Any] | None = None
) -> Iterator[StateSnapshot]:
    """`snap` and its parents, newest first (up to a checkpoint in `stop`, already read)."""
    while snap is not None and snap.metadata is not None and (stop is None or _id(snap) not in stop):
        yield snap
        snap = ctx.parent(session, snap)


def _page(
    session: ChatSession, snaps: Iterable[StateSnapshot], limit: int, metadata: dict[str, Any] | None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for snap in snaps:
        if len(out) >= max(1, limit):
            break
        meta = dict(snap.metadata or {})
        if not metadata or all(meta.get(k) == v for k, v in metadata.items()):
            out.append(thread_state(session.session_id, snap))
    return out


def _id(snap: StateSnapshot) -> str:
    return str(snap.config["configurable"].get("checkpoint_id") or "")
