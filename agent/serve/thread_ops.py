"""Deleting and copying a thread, within the caller's tenant only.

The JSONL saver's `delete_thread` / `copy_thread` act on a thread id in every tenant unless given
`tenant_id` (a LangGraph saver knows no tenants); the server always passes the caller's tenant, so
it never reaches across. Both hold the session lease: not while a run is going.
"""

from __future__ import annotations

from agent.core.errors import ConfigError
from agent.runner.turns import SessionHold
from agent.serve.auth import Principal
from agent.serve.serve_context import METADATA_KEY, ServeContext
from agent.session.removal import Removal, finish, remove_session
from agent.session.session import ChatSession
from checkpointing.saver import JsonlCheckpointSaver


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


def copy_thread(ctx: ServeContext, principal: Principal, session: ChatSession) -> ChatSession:
    """A new session holding a copy of every checkpoint of this one (its business history starts empty)."""
    saver = _jsonl_saver(ctx, "copying")
    meta = dict(session.context.get(METADATA_KEY) or {})
    meta["copied_from"] = session.session_id
    new = ctx.create_session(principal, None, meta)
    with SessionHold(ctx.runner.settings, ctx.runner.lease, session.tenant_id, session.session_id):
        saver.copy_thread(session.session_id, new.session_id, tenant_id=session.tenant_id)
    return new
