"""The Celery app of agentrt, built from `AgentSettings.workers` (producers and workers alike).

Settings that make long agent runs safe (each explained in docs/how-to/workers.md):
`task_acks_late` (a task is acknowledged when it returns, so a lost worker's task is delivered
again), `task_reject_on_worker_lost` (a pool process killed mid-task requeues the task instead of
failing it), `worker_prefetch_multiplier=1` (a worker holds no more tasks than it runs, so a queued
turn is not stuck behind a long run), the Redis broker's `visibility_timeout` above the longest run
(an unacknowledged task is redelivered only after it), and JSON only (no pickle).
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from agent.core.config import AgentSettings
from agent.core.errors import ConfigError

TASK_NAME = "agentrt.drain_session"


def celery_config(settings: AgentSettings) -> dict[str, Any]:
    """The Celery configuration for these settings (`ConfigError` when no broker is configured)."""
    w = settings.workers
    if not w.broker_url:
        raise ConfigError(
            "no task broker configured: set workers.broker_url (or AGENTRT_BROKER_URL), e.g. "
            "redis://127.0.0.1:6379/0 or amqp://guest:guest@127.0.0.1:5672//"
        )
    backend = w.result_backend or settings.persistence.redis_url
    if not backend:
        raise ConfigError("no result backend: set workers.result_backend (redis://...) or persistence.redis_url")
    conf: dict[str, Any] = {
        "broker_url": w.broker_url,
        "result_backend": backend,
        "task_default_queue": w.queue,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_track_started": True,
        "task_send_sent_event": True,
        "worker_send_task_events": True,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "result_expires": w.result_expires_s,
        "worker_soft_shutdown_timeout": w.soft_shutdown_s,
        "broker_connection_retry_on_startup": True,
        "worker_hijack_root_logger": False,
        "worker_proc_alive_timeout": 60.0,  # a pool process builds its runner at start (agent/worker.py)
    }
    if w.broker_url.startswith(("redis://", "rediss://")):
        conf["broker_transport_options"] = {
            "visibility_timeout": w.visibility_timeout_s,
            "global_keyprefix": w.key_prefix,
            "unacked_restore_interval": w.restore_interval_s,
            "unacked_restore_throttle": 1,
        }
    if backend.startswith(("redis://", "rediss://")):
        conf["result_backend_transport_options"] = {"global_keyprefix": w.key_prefix}
    return conf


def make_app(settings: AgentSettings) -> Celery:
    """A Celery app configured from `settings` (tasks are sent by name, so producers need no import of them)."""
    app = Celery("agentrt", set_as_current=False)
    app.conf.update(celery_config(settings))
    return app
