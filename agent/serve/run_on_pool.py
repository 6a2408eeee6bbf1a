"""Running one API run to its end on a pool thread: its events pushed to its record, a cancel
honoured at the next event (or, for a run superseded by a new turn, at the next step boundary that
leaves no model tool call without its result), a rollback applied once the run has let go of the
session, its final values read, and its row kept in the thread's run table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from typing import Any

from agent.core.errors import SessionError
from agent.core.results import RunEvent
from agent.core.statuses import RunStatus
from agent.runner.agent_runner import AgentRunner
from agent.runner.chunks import clean_stop
from agent.serve.encode import jsonable
from agent.serve.run_record import THIS_SERVER, ApiRunStatus, CancelAction, RunRecord
from agent.serve.run_table import RunTable

log = logging.getLogger("agentrt.serve")


class RunExecutor:
    """Runs runs (one call of `run` per run, on the calling thread)."""

    def __init__(
        self,
        runner: AgentRunner,
        rollback: Callable[[RunRecord], bool] | None,
        unlist: Callable[[RunRecord], None],
        on_workers: bool = False,
    ) -> None:
        self.runner = runner
        self.on_workers = on_workers
        """Runs execute on the Celery workers: a worker rolls back the run it stopped (agent/runner/drain.py)."""
        self.rollback = rollback
        """Rolls a stopped run's writes back (True: done, the run is deleted; False: it stays, interrupted)."""
        self.unlist = unlist
        """Forgets a deleted run (the engine no longer finds it)."""

    def table(self, rec: RunRecord) -> RunTable:
        """The run table of the run's thread."""
        return RunTable(self.runner.settings, rec.tenant_id, rec.thread_id)

    def run(self, rec: RunRecord, on_start: Callable[[BaseException | None], None] | None) -> None:
        """Run `rec` to its end. `on_start` (a run whose request waits to see it start) is called once:
        with None at its first event, or with why it could not start (nothing of it is kept then)."""
        status = ApiRunStatus.ERROR
        started = following = False
        try:
            if rec.job is None:
                raise SessionError(f"run {rec.run_id} has nothing to run")
            gen = rec.job()
            for ev in gen:
                if not started:
                    started = True
                    self._started(rec, ev)
                    if on_start is not None:
                        on_start(None)
                if ev.kind == "final":
                    rec.result = ev.data
                if following:  # stopped; its worker rolls it back, then settles its turn
                    continue
                rec.push(ev)
                stop = ev.kind != "final" and rec.cancel_requested.is_set()
                if stop and (not rec.stop_clean or clean_stop(ev)):
                    if self.on_workers and rec.cancel_action is CancelAction.ROLLBACK:
                        # Followed to the end: the next run starts only once the rollback is made.
                        following = True
                        continue
                    if isinstance(gen, Generator):
                        gen.close()  # the runner releases the lease; the last checkpoint stays resumable
                    status = ApiRunStatus.INTERRUPTED
                    break
            else:
                rolled = "rollback" in (rec.result or {})  # only a rollback asked for says so
                status = ApiRunStatus.INTERRUPTED if rolled else _status_of(rec.result)
        except BaseException as err:  # handed to the request (before start) or to the stream (after)
            if not started and on_start is not None:
                rec.done.set()
                on_start(err)
                return
            rec.error = {"error": type(err).__name__, "message": str(err)}
            status = ApiRunStatus.ERROR
        if not started and rec.error is None:  # a run that yielded nothing: nothing to follow
            empty = SessionError("the run ended before it started; see the server log")
            if on_start is not None:
                rec.done.set()
                on_start(empty)
                return
            rec.error = {"error": type(empty).__name__, "message": str(empty)}
        if status is ApiRunStatus.ERROR and rec.error is None:
            message = str((rec.result or {}).get("error") or (rec.result or {}).get("finish_reason") or "run failed")
            rec.error = {"error": "RunFailed", "message": message}
        self._close(rec, status, started)

    def _started(self, rec: RunRecord, first: RunEvent) -> None:
        """The run's first event: its agentrt run (and the part of it this run is) is known."""
        rec.agent_run_id = str(first.data.get("run_id") or "")
        if first.kind == "recovered" and not first.data.get("finished"):
            rec.segment = self._resume_entry(rec)
        rec.executor = str(first.data.get("worker") or THIS_SERVER)
        rec.status = ApiRunStatus.RUNNING
        rec.begin(self.runner.settings)
        self.table(rec).put(rec.row())

    def _resume_entry(self, rec: RunRecord) -> str:
        """The `run_resume` entry this run wrote (its run holds the lease: no other can be newer)."""
        try:
            events = self.runner.manager.event_log(rec.tenant_id, rec.thread_id)
            entry = events.newest(frozenset({"run_resume"}), {"run_id": rec.agent_run_id})
        except Exception as err:  # listed as the event log has it; the run itself goes on
            log.warning("could not read the resume entry of run %s: %s", rec.run_id, err)
            return ""
        return entry.id if entry is not None else ""

    def _close(self, rec: RunRecord, status: ApiRunStatus, started: bool) -> None:
        if not started and not self._thread_exists(rec):  # deleted meanwhile: nothing to keep the run in
            rec.finish(status)
            return
        outcome = (rec.result or {}).get("rollback")
        if status is ApiRunStatus.INTERRUPTED and rec.cancel_action is CancelAction.ROLLBACK and started:
            # On the workers the worker made the fork or renewed a first turn's thread (or found
            # nothing to undo) before it took the thread's next turn; `first_turn` is an older
            # worker's answer, whose thread is renewed here, as in-process.
            if outcome is None:
                rec.deleted = self._roll_back(rec) if not self.on_workers else False
            else:
                done = ("forked", "renewed", "nothing")
                rec.deleted = outcome in done or (outcome == "first_turn" and self._roll_back(rec))
        if rec.deleted:
            rec.error = {"error": "RunRolledBack", "message": f"run {rec.run_id} was rolled back"}
            status = ApiRunStatus.ERROR
            self.unlist(rec)
            self.table(rec).delete(rec.row())
        else:
            self._read_final(rec)
            rec.status = status  # the table has the run's end before anyone sees it over
            self.table(rec).put(rec.row())
        rec.finish(status)

    def _thread_exists(self, rec: RunRecord) -> bool:
        try:
            return bool(self.runner.manager.exists(rec.tenant_id, rec.thread_id))
        except Exception:  # unreadable: keep the run's row
            return True

    def _roll_back(self, rec: RunRecord) -> bool:
        if self.rollback is None:
            return False
        try:
            return self.rollback(rec)
        except Exception as err:  # the run stays, interrupted: its last checkpoint is still resumable
            log.warning("could not roll back run %s of thread %s: %s", rec.run_id, rec.thread_id, err)
            return False

    def _read_final(self, rec: RunRecord) -> None:
        """The thread's state after the run, as `threads.get_state` reads it (a branch not run yet: its fork point)."""
        conf = {"thread_id": rec.thread_id, "tenant_id": rec.tenant_id}
        try:
            fork_cp = self.runner.manager.get(rec.tenant_id, rec.thread_id).context.get("fork_checkpoint_id")
            if fork_cp:
                conf["checkpoint_id"] = str(fork_cp)
            snap = self.runner.graph.get_state({"configurable": conf})
        except Exception:  # the run's outcome is already known; the values are a courtesy
            return
        rec.final_values = jsonable(snap.values or {})
        rec.interrupts = [jsonable(i) for i in snap.interrupts]


def _status_of(result: dict[str, Any] | None) -> ApiRunStatus:
    # As LangGraph's server: a run that stopped to ask a human, or at a breakpoint (INTERRUPTED: the
    # graph returned with a step left), did what it was asked; the thread is interrupted.
    if (result or {}).get("status") in (RunStatus.COMPLETED, RunStatus.PAUSED, RunStatus.INTERRUPTED):
        return ApiRunStatus.SUCCESS
    return ApiRunStatus.ERROR
