"""The doctor's `worker_queue` check (run when a task broker is configured): the graph version a
session runs on, and its turns that wait for a worker of that version (a rolling upgrade left them
on a version no worker runs any more).

Read-only: the session's event log (its newest `run_start`, agent/runner/routing.py) and its inbox.

`worker_queues` (`agentrt doctor` without a session id, with a broker): how many turns wait in the
shared queue and in this agentrt's graph version's queue, asked of the broker (a passive declare:
nothing is created or taken).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.doctor.facts import Check, SessionFacts
from agent.doctor.finding import finding
from checkpointing.layout import EVENTS_FILE, INBOX_FILE
from checkpointing.verify import Health

if TYPE_CHECKING:  # the inbox and the routing load when a broker is configured (these checks run)
    from agent.core.config import AgentSettings
    from agent.doctor.subject import RuntimeParts
    from checkpointing.store.base import SessionStreams

NAME = "worker_queue"
UPGRADE = "see 'Rolling upgrade' in docs/production.md"


def worker_queue(f: SessionFacts) -> Check:
    """OK unless turns of a session of another graph version than this agentrt's wait for a worker (WARN)."""
    from agent.runner.routing import logged_graph_version, version_queue
    from agent.session.inbox import Inbox, TurnStatus
    from agent.session.record_store import event_log, session_streams

    settings = f.ctx.settings
    found = logged_graph_version(event_log(settings, f.tenant_id, f.session_id, _intact_copy(f, EVENTS_FILE)))
    own = f.ctx.pins.graph_version
    if found is None:
        return finding(
            NAME, "OK", f"no run yet: its turns go to queue {settings.workers.queue}, for any worker", "nothing to do"
        )
    queue = version_queue(settings, found)
    inbox = _intact_copy(f, INBOX_FILE) or session_streams(settings, f.tenant_id, f.session_id)
    turns = Inbox.over(inbox).turns()
    waiting = [t.turn_id for t in turns if t.status in (TurnStatus.PENDING, TurnStatus.RUNNING)]
    where = {"graph_version": found, "this_agentrt": own, "queue": queue, "waiting": waiting}
    if found == own or not waiting:
        said = "this agentrt's" if found == own else f"not this agentrt's ({own})"
        summary = f"runs on graph version {found}, {said}; its turns go to queue {queue}"
        return finding(NAME, "OK", summary, "nothing to do", **where)
    return finding(
        NAME,
        "WARN",
        f"{len(waiting)} unfinished turn(s) run only on a worker of graph version {found}, from queue {queue} "
        f"(this agentrt: {own})",
        f"keep (or start) a worker of graph version {found} until they ran, or let the new workers take the "
        f"session over (workers.adopt_graph_versions: [{found}]); {UPGRADE}",
        **where,
    )


def _intact_copy(f: SessionFacts, name: str) -> SessionStreams | None:
    """The session's streams in the copy the other checks read (`agent.doctor.store_copy`) when
    the record store found stream `name` (a session log) intact: the copy then holds its very
    bytes, and reading them costs no query. None: read the record store itself."""
    if f.base is None or any(r.name == name and r.health is not Health.OK for r in f.reports):
        return None
    from checkpointing.store.file_store import FileStore

    return FileStore(f.base).session(f.tenant_id, f.session_id, "batch")


QUEUES = "worker_queues"


def queues_check(parts: RuntimeParts) -> Check:
    """`agentrt doctor` without a session id, with a broker: how many turns wait in the shared queue
    and in the queues of this agentrt's graph version (and of the versions it adopts)."""
    from agent.runner.routing import version_queue

    settings = parts.settings
    versions = [parts.pins.graph_version, *settings.workers.adopt_graph_versions]
    names = [settings.workers.queue, *(version_queue(settings, v) for v in versions)]
    try:
        counts = waiting_in(settings, names)
    except Exception as err:  # kombu/amqp/redis errors alike: the broker did not answer
        return finding(
            QUEUES, "WARN", f"the broker did not answer: {type(err).__name__}: {err}", "check workers.broker_url"
        )
    said = ", ".join(f"{name} {n}" for name, n in counts.items())
    return finding(
        QUEUES,
        "OK",
        f"turns waiting for a worker: {said} (this agentrt's graph version: {parts.pins.graph_version})",
        f"a version's queue that stays non-empty needs a worker of that version; {UPGRADE}",
        queues=counts,
    )


def waiting_in(settings: AgentSettings, names: list[str]) -> dict[str, int]:
    """The tasks waiting (not yet taken by a worker) in each queue; 0 for a queue never declared."""
    from agent.runner.submit import producer_app

    counts: dict[str, int] = {}
    with producer_app(settings).connection_for_read() as conn:
        conn.ensure_connection(max_retries=1, timeout=5)
        if settings.workers.broker_url and settings.workers.broker_url.startswith(("redis://", "rediss://")):
            # A queue is a list under workers.key_prefix (the channel's client adds it); agentrt sends
            # no task priorities, so no other list holds its tasks.
            client = conn.default_channel.client
            return {name: int(client.llen(name)) for name in names}
        for name in names:
            channel = conn.channel()  # a fresh one each time: RabbitMQ closes it on a queue not found
            try:
                counts[name] = channel.queue_declare(name, passive=True).message_count
            except conn.channel_errors:
                counts[name] = 0
            finally:
                try:
                    channel.close()
                except Exception:  # already closed by the broker
                    pass
    return counts
