"""A new turn: check the input, get the session under its lease, record the turn, drive the graph."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agent.errors import ConfigError, SessionNotFound
from agent.results import RunEvent
from agent.run.branches import head, set_room
from agent.run.drive import drive
from agent.run.unfinished import refuse_unfinished
from agent.session.session import ChatSession
from agent.turns import EventRecorder, SessionHold

if TYPE_CHECKING:
    from agent.run.core import RunnerCore


def stream_turn(
    rt: RunnerCore,
    text: str,
    session_id: str | None,
    tenant_id: str | None,
    user_id: str | None,
    skill: str | None,
) -> Iterator[RunEvent]:
    """Run one turn, yielding events as they happen; the last event is `final` with the result."""
    if not text or not text.strip():
        raise ConfigError('empty input: give the agent something to do, e.g. agentrt run "summarise notes.md"')
    if skill is not None and skill not in rt.builder.skills:
        known = ", ".join(sorted(rt.builder.skills)) or "none"
        raise ConfigError(f"unknown skill {skill!r}; the skills folder has: {known}")
    tenant, user, sid = rt._ids(session_id, tenant_id, user_id)
    session = _session_for_turn(rt, tenant, sid, user, session_id is None)
    with SessionHold(rt.settings, rt.lease, tenant, sid) as hold:
        # Re-read under the lease: another run may have ended between the first read and the grant.
        session = rt.manager.get(tenant, sid, user)
        refuse_unfinished(rt, session)
        session = rt.manager.start_turn(session)
        set_room(session)  # saved with the run status below
        run_id = f"r-{uuid.uuid4().hex[:12]}"
        recorder = EventRecorder(rt.manager, session, hold.token, run_id)
        rt.manager.mark_run(session, run_id, "RUNNING")
        recorder.record("run_start", {"run_id": run_id, "pins": rt.pins.as_config(), "tools": list(rt.pins.tool_names)})
        rt.manager.memory.add_user_turn(session, text, run_id, hold.token)
        yield RunEvent("started", {"session_id": sid, "run_id": run_id, "tenant_id": tenant})
        # The turn continues the branch's own checkpoint (a fresh branch: its fork point).
        extra: dict[str, Any] = head(rt, session).run_extra()
        config = rt._config(session, run_id, hold.token, **extra)
        graph_input: dict[str, Any] = {"user_input": text}
        if skill is not None:
            graph_input["active_skill"] = skill
        yield from drive(rt, graph_input, config, session, recorder)


def _session_for_turn(rt: RunnerCore, tenant: str, sid: str, user: str | None, new: bool) -> ChatSession:
    if not new:
        try:
            session = rt.manager.get(tenant, sid, user)
            session.check_can_start_turn()
            return session
        except SessionNotFound:
            if rt.manager.exists(tenant, sid):
                raise SessionNotFound(
                    f"session {sid} belongs to another user of tenant {tenant}; check --user"
                ) from None
    s = rt.settings.session
    return rt.manager.create(tenant, s.agent_id, user or s.user_id, sid, config_digest=rt.pins.surface_digest)
