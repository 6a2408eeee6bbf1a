"""A new turn: check the input, get the session under its lease (a `Turn`), record the turn, stream the graph."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agent.core import faults
from agent.core.config import max_input_chars
from agent.core.errors import ConfigError, InputError, SessionExists, SessionNotFound, quote_id
from agent.core.results import RunEvent
from agent.runner.branches import head, set_room
from agent.runner.options import RunOptions
from agent.runner.sigint import HeldSigint
from agent.runner.unfinished import refuse_unfinished
from agent.session.session import ChatSession
from checkpointing.ids import shown

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner


class TurnStart:
    """A new turn of a `Runner` (its `starts`): check the input, get the session under its lease (a
    `Turn`), record the turn, stream the graph. `stream` reads top to bottom; the checks follow it."""

    def __init__(self, rt: Runner) -> None:
        self.rt = rt

    def stream(
        self,
        text: str,
        session_id: str | None,
        tenant_id: str | None,
        user_id: str | None,
        skill: str | None,
        new_session_id: str | None = None,
        options: RunOptions | None = None,
    ) -> Iterator[RunEvent]:
        """Run one turn, yielding events as they happen; the last event is `final` with the result.

        `session_id` continues that session (it must exist for the tenant and user); without it a new
        session is made, named `new_session_id` when given (which must not exist yet). The new session
        is created only once its lease is held. `options`: breakpoints, and whether the turn may
        discard a stopped run's unfinished step (`agent.runner.options`).
        """
        rt = self.rt
        opts = options or RunOptions()
        self.check_input(text, skill)
        if session_id is not None and new_session_id is not None:
            raise InputError("give either an existing session (--session) or a new one (--new-session), not both")
        tenant, user, sid = rt.ids(session_id if session_id is not None else new_session_id, tenant_id, user_id)
        new = session_id is None
        if new:
            self._refuse_taken(tenant, sid)
        else:
            self._existing(tenant, sid, user).check_can_start_turn()
        with rt.turn(tenant, sid) as turn:
            # A Ctrl-C from here until the recorder exists is held: it lands before anything is stored,
            # or once the run can be closed as INTERRUPTED (at `deliver`), never in between.
            with HeldSigint() as sigint:
                if new:
                    s = rt.settings.session
                    # Only the header is written here; the turn start below saves the session once.
                    session = rt.manager.create(
                        tenant, s.agent_id, user or s.user_id, sid, config_digest=rt.pins.surface_digest, save=False
                    )
                else:
                    # Re-read under the lease: another run may have ended between the first read and the grant.
                    session = self._existing(tenant, sid, user)
                refuse_unfinished(rt, session, discardable=opts.discard_unfinished)
                run_id = f"r-{uuid.uuid4().hex[:12]}"
                set_room(session)
                # One durable save: the turn counted, the room, and the run RUNNING, before its first entry.
                session = rt.manager.start_turn(session, run_id=run_id)
                recorder = turn.open(session, run_id, opts.overrides)
            try:
                sigint.deliver()
                # run_start is made durable with the user turn right after it (one fsync for both).
                recorder.record(
                    "run_start",
                    {
                        "run_id": run_id,
                        "pins": rt.pins_for(opts.overrides).as_config(),
                        "tools": list(rt.pins.tool_names),
                    },
                    defer_commit=True,
                )
                rt.manager.memory.add_user_turn(session, text, run_id, turn.token)
                yield RunEvent("started", {"session_id": sid, "run_id": run_id, "tenant_id": tenant})
                faults.crash_point("turn_recorded")
                # The turn continues the branch's own checkpoint (a fresh branch: its fork point).
                extra: dict[str, Any] = head(rt, session).run_extra()
            except KeyboardInterrupt as err:
                raise turn.interrupted() from err
            except Exception as err:  # e.g. the store went down: the run is FAILED, not left RUNNING
                turn.failed(err)
                raise
            graph_input: dict[str, Any] = {"user_input": text}
            if skill is not None:
                graph_input["active_skill"] = skill
            yield from turn.stream(graph_input, opts, **extra)

    def check_input(self, text: str, skill: str | None) -> None:
        """Refuse, before anything is stored, input no turn could run: empty, too long, an unknown skill."""
        if not text or not text.strip():
            raise ConfigError('empty input: give the agent something to do, e.g. agentrt run "summarise notes.md"')
        limit = max_input_chars(self.rt.settings)
        if len(text) > limit:
            raise InputError(
                f"input is {len(text)} characters, over the limit of {limit} (loop.max_input_chars, by default "
                "sized from model.context_window); shorten it, or save it as a file in the session's room "
                "and ask the agent to read that file"
            )
        if skill is not None and skill not in self.rt.builder.skills:
            known = ", ".join(sorted(self.rt.builder.skills)) or "none"
            raise ConfigError(f"unknown skill {shown(skill)}; the skills folder has: {known}")

    def _existing(self, tenant: str, sid: str, user: str | None) -> ChatSession:
        """The session to continue; `SessionNotFound` (never a new session) when the caller has none by this id."""
        try:
            return self.rt.manager.get(tenant, sid, user)
        except SessionNotFound:
            # Another user's session reads exactly as a missing one: whether it exists is not theirs to learn.
            raise SessionNotFound(
                f"no session {quote_id(sid)} for {_whose(tenant, user)}; `agentrt sessions` lists yours "
                "(a new session: leave out --session, or name it with --new-session ID)"
            ) from None

    def _refuse_taken(self, tenant: str, sid: str) -> None:
        if self.rt.manager.exists(tenant, sid):
            raise SessionExists(
                f"session {quote_id(sid)} already exists for tenant {quote_id(tenant)}; continue it with "
                f"`agentrt run --session {quote_id(sid)} ...`, or pick another id"
            )


def _whose(tenant: str, user: str | None) -> str:
    """'tenant T' or 'tenant T and user U', ids quoted for an error line."""
    return f"tenant {quote_id(tenant)}" + (f" and user {quote_id(user)}" if user else "")
