"""Runs of the API on the Celery workers (`serve.runs_on`; docs/reference/http-api.md, "On the workers").

A run is a turn submitted as `agentrt submit` does (marked `live`), an answer to an approval as
`agentrt resume --approve` queues it, or a continuation of the thread's unfinished run. The job
below follows the turn's live events (agent/runner/live.py) and yields them as the `RunEvent`s an
in-process run gives, so the engine, the stream modes and the page treat both alike. The turn's
inbox is the fallback: once it is settled and the channel is quiet, the job ends with its result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from agent.core.config import AgentSettings
from agent.core.errors import SessionError
from agent.core.results import RunEvent
from agent.core.statuses import RunStatus
from agent.runner.live import END, LiveChannel
from agent.runner.submit import TurnHandle, paused_turn, submit_decision, submit_resume, submit_turn

BLOCK_MS = 1000
CANCELLING = "cancelling"  # yielded while a cancel is pending, so the engine closes the job at once


def worker_job(
    settings: AgentSettings,
    tenant_id: str,
    user_id: str | None,
    thread_id: str,
    text: str | None,
    decision: dict[str, Any] | None,
    cancelled: Callable[[], bool],
    options: Callable[[], dict[str, Any] | None] = lambda: None,
    clean: Callable[[], bool] = lambda: False,
    rollback: Callable[[], bool] = lambda: False,
    relay: Callable[[Callable[[], None] | None], None] = lambda _: None,
) -> Callable[[], Iterator[RunEvent]]:
    """The job the engine runs: submit the turn (with `options()`, its `RunOptions` as a dict, read
    when it starts), then follow its events until it is settled. A cancel stops it at the next
    step, or with `clean()` at the next step a new turn can follow; with `rollback()` the worker
    also rolls the run back (agent/runner/drain.py) and the job follows the turn until it is settled, its
    final event saying under `rollback` what became of the run. `relay` is handed, once the turn is
    submitted, what tells its worker of a cancel at once (and None when the job is over): the job
    itself tells it too, but only between its reads of the turn's events."""

    def job() -> Iterator[RunEvent]:
        channel = LiveChannel(settings)
        try:
            handle, after = _submit(settings, channel, tenant_id, user_id, thread_id, text, decision, options())
            ids = (handle.tenant_id, handle.session_id, handle.turn_id)
            relay(lambda: channel.request_cancel(*ids, clean=clean(), rollback=rollback()))
            yield from _follow(channel, handle, after, cancelled, clean, rollback)
        finally:
            relay(None)
            channel.close()

    return job


def _submit(
    settings: AgentSettings,
    channel: LiveChannel,
    tenant: str,
    user: str | None,
    sid: str,
    text: str | None,
    decision: dict[str, Any] | None,
    options: dict[str, Any] | None,
) -> tuple[TurnHandle, str]:
    paused = paused_turn(settings, sid, tenant)
    if paused is not None:
        if decision is None:
            # Queued behind the paused turn, the run would wait for ever: refuse it as in-process.
            raise SessionError(
                f"thread {sid} is waiting for a human decision: answer it with "
                'command={"resume": {"approved": true}} (or false, with a "reason")'
            )
        # The same turn goes on: its stream already holds the first pass; read what comes after.
        after = channel.last_id(tenant, sid, paused.turn_id)
        channel.clear_cancel(tenant, sid, paused.turn_id)
        return submit_decision(settings, sid, decision, tenant, live=True, options=options), after
    if text is not None:
        return submit_turn(settings, text, sid, tenant, user, live=True, options=options), "0-0"
    return submit_resume(settings, sid, tenant, user, decision, live=True, options=options), "0-0"


def _follow(
    channel: LiveChannel,
    handle: TurnHandle,
    after: str,
    cancelled: Callable[[], bool],
    clean: Callable[[], bool],
    rollback: Callable[[], bool],
) -> Iterator[RunEvent]:
    ids = (handle.tenant_id, handle.session_id, handle.turn_id)
    started = final_seen = asked = False
    try:
        while True:
            records = channel.read(*ids, after, BLOCK_MS)
            for rid, kind, data in records:
                after = rid
                if kind == END:
                    yield from _closing(dict(data.get("result") or {}), started, final_seen)
                    return
                started, final_seen = True, final_seen or kind == "final"
                yield RunEvent(kind, data if isinstance(data, dict) else {"value": data})
            if not asked and cancelled():  # at once, also while events flow: the worker checks every step
                channel.request_cancel(*ids, clean=clean(), rollback=rollback())
                asked = True
            if records:
                continue
            if cancelled():
                yield RunEvent(CANCELLING, {})
                continue
            turn = handle.turn()
            if turn.status.settled and not channel.read(*ids, after, None):
                # Settled without an end record (its worker lost Redis, or a CLI resumed it).
                yield from _closing(turn.result, started, final_seen)
                return
    except GeneratorExit:
        # The engine closes the job when its client cancels, or (a new turn waits to follow) once
        # the run reached a step that turn can follow: the worker then stops there, not later.
        channel.request_cancel(*ids, clean=clean(), rollback=rollback())
        raise


def _closing(result: dict[str, Any], started: bool, final_seen: bool) -> Iterator[RunEvent]:
    if "rollback" in result:  # what became of a run to roll back: the engine reads it from the final event
        status = str(result.get("run_status") or result.get("status") or RunStatus.FAILED)
        yield RunEvent("final", {**result, "status": status})
        return
    if not started:
        # Refused before its run began (e.g. the thread waits for an approval): the request fails, as in-process.
        raise SessionError(str(result.get("error") or "the workers could not start the run; see their log"))
    if not final_seen:
        status = str(result.get("run_status") or result.get("status") or RunStatus.FAILED)
        yield RunEvent("final", {**result, "status": status})
