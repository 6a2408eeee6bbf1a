"""The Celery worker of agentrt: the app and its one task, "this session has input to process".

Start workers (on every machine, as many as you like; docs/how-to/workers.md):

    AGENTRT_CONFIG=configs/production.yaml celery -A agent.worker worker -Q agentrt --concurrency 2

Each worker also consumes the queue of its own graph version, `agentrt.<GRAPH_VERSION>` (added at
start, whatever `-Q` says): a turn of a session that has run goes there, so during a rolling upgrade
a session's turns run only on workers of the graph version its checkpoints were written under
(agent/runner/routing.py). A task of a session of another version that still reaches this worker is sent
on to that version's queue, untouched. `workers.adopt_graph_versions` makes a worker take over the
sessions of older versions too (it consumes their queues; a resume accepts the graph change).

`agentrt submit` / `runner.submit()` append a turn to the session's inbox and send
`agentrt.drain_session(tenant, session, turn_id)`; the task runs `agent.runner.drain.drain`. A busy
session (another worker holds its drain lease, or a run holds its session lease) retries the task
with a growing delay (up to 5 s); a backend outage (Redis, PostgreSQL, disk) too, until it is over.

A turn submitted by `agentrt serve` is `live`: the worker publishes its events (graph chunks included)
to Redis for the server to stream, and stops it at a step boundary when its client cancels
(agent/runner/live.py).

With `session.retention_days` set, a worker reclaims old sessions after a task, at most every
`session.gc_every_minutes` and one worker at a time (agent/session/retention.py).

Every `session.converge_every_s` (60 s), idle or not, one process of the fleet replays what the
SQL and Redis layers missed in an outage for the sessions whose own process died before it could
(agent/session/sweep.py): each pool process runs a `Sweeper` thread, and a claim picks one of them
per period.

SIGTERM to the worker's main process (what `docker stop` and systemd send) is Celery's warm
shutdown: no new tasks are taken, and the running ones are told to stop at their next step boundary
(after the node that is running); their turn is left resumable and their task requeued
(`Reject(requeue=True)`), so another worker resumes it from the checkpoint.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import random
from multiprocessing.synchronize import Event
from typing import Any

from celery import Task, signals
from celery.exceptions import Reject

from agent.core.config import load_settings
from agent.core.errors import BackendUnavailable, ConfigError, LeaseHeld
from agent.runner.agent_runner import AgentRunner
from agent.runner.celery_app import TASK_NAME, make_app
from agent.runner.chunks import GraphChunks
from agent.runner.drain import OtherGraphVersion, Stopping, drain
from agent.runner.live import LiveChannel
from agent.runner.routing import version_queue
from agent.session.inbox import TurnStatus
from agent.session.record_store import inbox as record_inbox
from agent.session.sweep import Sweeper

log = logging.getLogger("agentrt.worker")
MAX_BACKOFF_S = 5.0

settings = load_settings(os.environ.get("AGENTRT_CONFIG") or None)
app = make_app(settings)
_runner: AgentRunner | None = None
_live: LiveChannel | None = None
_stop: Event | None = None
_sweeper: Sweeper | None = None


@signals.celeryd_after_setup.connect
def _consume_own_version(instance: Any = None, **_: Any) -> None:
    # Read here, not at import: a process may build a different graph before starting its worker.
    import graph.build

    queues = [version_queue(settings, v) for v in (graph.build.GRAPH_VERSION, *settings.workers.adopt_graph_versions)]
    if instance is not None:
        for queue in queues:
            instance.app.amqp.queues.select_add(queue)
    log.info("agentrt worker: graph version %s, also consuming %s", graph.build.GRAPH_VERSION, ", ".join(queues))


@signals.worker_init.connect
def _make_stop_flag(**_: Any) -> None:
    # Made in the main process before the pool forks, so every pool process shares it.
    global _stop
    _stop = multiprocessing.get_context("fork").Event()


@signals.worker_shutting_down.connect
def _ask_runs_to_stop(**_: Any) -> None:
    if _stop is not None:
        _stop.set()


@signals.worker_process_init.connect
def _warm_up(**_: Any) -> None:
    # Build the runner as each pool process starts, so the first turn does not pay for it.
    try:
        runner()
    except Exception as err:  # reported again (and the turn failed) when a task needs it
        log.error("agentrt worker: cannot build the runtime: %s", err)
    # What start-up built lives as long as the process: out of the collector's full passes (each
    # walks it again, ~0.1 s), as `agentrt` commands do; collected first, so no garbage is kept.
    gc.collect()
    gc.freeze()
    # Debts of dead processes are paid even while no task comes (one pool process per period: a claim).
    global _sweeper
    every = settings.session.converge_every_s
    if every is not None and _sweeper is None:
        _sweeper = Sweeper(runner, every, stopping).start()


@signals.task_postrun.connect
def _reclaim_old_sessions(**_: Any) -> None:
    # Retention without a beat: after a task, at most every session.gc_every_minutes, one worker at a time.
    if stopping() or settings.session.retention_days is None:
        return
    from agent.session.retention import maybe_collect

    try:
        maybe_collect(runner())
    except Exception as err:  # never fails a turn; the next task tries again
        log.warning("agentrt worker: session retention not run: %s", err)


def stopping() -> bool:
    """Whether this worker is shutting down (runs stop at their next step boundary)."""
    return _stop is not None and _stop.is_set()


def runner() -> AgentRunner:
    """This pool process's runner (built on first use, after the fork)."""
    global _runner
    if _runner is None:
        # The raw graph chunks too: a turn of `agentrt serve` streams them to its client (agent/runner/live.py).
        _runner = AgentRunner(settings, chunks=GraphChunks())
    return _runner


def live_channel() -> LiveChannel | None:
    """This pool process's channel for live events (None without a Redis: no turn is live then)."""
    global _live
    if _live is None:
        try:
            _live = LiveChannel(settings)
        except ConfigError:
            return None
    return _live


def _backoff(retries: int) -> float:
    return min(MAX_BACKOFF_S, 0.2 * 2 ** min(retries, 8)) * random.uniform(0.5, 1.0)


@app.task(bind=True, name=TASK_NAME, max_retries=None, acks_late=True, reject_on_worker_lost=True)
def drain_session(self: Task, tenant_id: str, session_id: str, turn_id: str) -> dict[str, Any]:
    """Run the session's open turns in order until `turn_id` is settled; returns the turn's summary."""
    worker = f"{self.request.hostname}:{os.getpid()}"
    try:
        agent = runner()
    except ConfigError as err:
        # A worker that cannot build its runtime fails the turn loudly instead of leaving callers waiting.
        inbox = record_inbox(settings, tenant_id, session_id)
        inbox.mark_done(turn_id, {"status": TurnStatus.FAILED, "error": f"worker {worker}: {err}"}, worker)
        raise
    try:
        version = agent.pins.graph_version
        adopted = frozenset(settings.workers.adopt_graph_versions)
        return drain(
            agent,
            tenant_id,
            session_id,
            turn_id,
            worker,
            stopping,
            live_channel(),
            graph_version=version,
            adopted=adopted,
        )
    except OtherGraphVersion as err:
        # Nothing of the session was touched: its turns run on a worker of its own version.
        queue = version_queue(settings, err.version)
        log.info("turn %s: %s; sent on to queue %s", turn_id, err, queue)
        raise self.retry(queue=queue, countdown=0) from None
    except LeaseHeld as err:
        raise self.retry(countdown=_backoff(self.request.retries), exc=err) from None
    except BackendUnavailable as err:
        log.warning("turn %s: storage error, retrying: %s", turn_id, err)
        raise self.retry(countdown=_backoff(self.request.retries + 3), exc=err) from None
    except Stopping as err:
        raise Reject(str(err), requeue=True) from None
