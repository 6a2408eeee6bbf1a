"""Deleting and copying a thread, within the caller's tenant only.

The JSONL saver's `delete_thread` / `copy_thread` act on a thread id in every tenant unless given
`tenant_id` (a LangGraph saver knows no tenants); the server always passes the caller's tenant, so
it never reaches across. Both hold the session lease: not while a run is going (a thread's
deletion cancels the run this server has going on it first).
"""

from __future__ import annotations

import asyncio

from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError, LeaseHeld
from agent.runner.turns import SessionHold
from agent.serve.auth import Principal
from agent.serve.crons import CronBook
from agent.serve.run_record import CancelAction
from agent.serve.serve_context import METADATA_KEY, ServeContext
from agent.session.removal import Removal, finish, remove_session
from agent.session.session import ChatSession
from checkpointing.saver import JsonlCheckpointSaver

RUN_STOP_S = 30.0
"""How long a deleted thread's run in this process is given to stop and let go of the thread."""


def _jsonl_saver(ctx: ServeContext, what: str) -> JsonlCheckpointSaver:
    saver = ctx.runner.saver
    if not isinstance(saver, JsonlCheckpointSaver):
        raise ConfigError(f"{what} a thread needs persistence.saver: jsonl (this server uses another saver)")
    return saver


def delete_thread(ctx: ServeContext, session: ChatSession) -> None:
    """Remove the session from every layer, its checkpoints and its folder, for good (what
    `agentrt erase` does for one session: `agent.session.removal`); its blobs go unless shared."""
    _jsonl_saver(ctx, "deleting")
    out = Removal()
    try:
        remove_session(ctx.parts, session.tenant_id, session.session_id, out, held_raises=True)
    finally:
        finish(ctx.parts, out)


async def remove_thread(ctx: ServeContext, principal: Principal, thread_id: str, held_wait_s: float = 0.0) -> None:
    """Delete the thread as `threads.delete` does, and as LangGraph's server does a busy one: its
    pending runs never start, a run going on it in this process is cancelled (`interrupt`) and
    waited for, its crons go. A run another server holds on it answers `LeaseHeld` (409) once
    `held_wait_s` passed (that run's own cancel may be on its way)."""
    session = await run_in_threadpool(ctx.session, principal, thread_id)  # 404 for a thread the caller lacks
    tenant, sid = session.tenant_id, session.session_id
    ctx.engine.forget(tenant, sid)
    rec = ctx.engine.active(tenant, sid)
    if rec is not None:
        await run_in_threadpool(ctx.engine.cancel, rec, CancelAction.INTERRUPT)
        held_wait_s = max(held_wait_s, RUN_STOP_S)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + held_wait_s
    while True:
        try:
            await run_in_threadpool(delete_thread, ctx, session)
            break
        except LeaseHeld:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(0.1)
    await run_in_threadpool(CronBook(ctx.settings, tenant).drop_thread, sid)


def copy_thread(ctx: ServeContext, principal: Principal, session: ChatSession) -> ChatSession:
    """A new session holding a copy of every checkpoint of this one (its business history starts empty)."""
    saver = _jsonl_saver(ctx, "copying")
    meta = dict(session.context.get(METADATA_KEY) or {})
    meta["copied_from"] = session.session_id
    new = ctx.create_session(principal, None, meta)
    with SessionHold(ctx.runner.settings, ctx.runner.lease, session.tenant_id, session.session_id):
        saver.copy_thread(session.session_id, new.session_id, tenant_id=session.tenant_id)
    return new
