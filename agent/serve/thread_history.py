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

from agent.runner.branches import fork_point_of, head_of
from agent.runner.run_lifecycle import ROLLED_BACK_BRANCH
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
    every branch shown; only those older than `before` and whose metadata holds `metadata`. Each
    state is read as JSON kept by checkpoint (`ServeContext.state_at`): shared, never changed."""
    others = [] if checkpoint_id else other_heads(ctx, session)
    if not others:
        state = ctx.state_at(session, checkpoint_id)
        if before:
            state = _parent(ctx, session, ctx.state_at(session, before))
        return _page(_chain(ctx, session, state), limit, metadata)
    seen: dict[str, dict[str, Any]] = {}
    for start in (None, *others):
        for found in _chain(ctx, session, ctx.state_at(session, start), seen):
            seen[_id(found)] = found
    ordered = sorted(seen.values(), key=_id, reverse=True)  # checkpoint ids are time-ordered
    if before:
        ordered = [s for s in ordered if _id(s) < before]
    return _page(iter(ordered), limit, metadata)


def _chain(
    ctx: ServeContext, session: ChatSession, state: dict[str, Any] | None, stop: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """`state` and its parents, newest first (up to a checkpoint in `stop`, already read)."""
    while state is not None and (stop is None or _id(state) not in stop):
        yield state
        state = _parent(ctx, session, state)


def _parent(ctx: ServeContext, session: ChatSession, state: dict[str, Any] | None) -> dict[str, Any] | None:
    """The state before `state` on its branch (None at the first)."""
    parent = (state or {}).get("parent_checkpoint") or {}
    return ctx.state_at(session, str(parent["checkpoint_id"])) if parent.get("checkpoint_id") else None


def _page(states: Iterable[dict[str, Any]], limit: int, metadata: dict[str, Any] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for state in states:
        if len(out) >= max(1, limit):
            break
        meta = state.get("metadata") or {}
        if not metadata or all(meta.get(k) == v for k, v in metadata.items()):
            out.append(state)
    return out


def _id(state: dict[str, Any]) -> str:
    return str(state["checkpoint"].get("checkpoint_id") or "")
