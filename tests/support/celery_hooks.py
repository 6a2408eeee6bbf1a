"""Test-only Celery signal hooks, loaded into a drill's workers with `celery worker --include`.

- every task execution is counted under `<AGENTRT_TEST_KEYS>:executions:<task id>`;
- when `<prefix>:crash-after:<turn id>` exists, the pool process that just finished that turn's
  task deletes the key and SIGKILLs its whole worker (its process group) in `task_postrun`: after
  the turn's work and its result, before the main process acknowledges the message (a crash, or a
  lost machine, between the end and the ack). Killing only the pool process would not do: Celery
  then sees the stored SUCCESS and acknowledges.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import redis
from celery import signals

_client: redis.Redis | None = None


def _redis() -> tuple[redis.Redis, str]:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379"))
    return _client, os.environ["AGENTRT_TEST_KEYS"]


@signals.task_prerun.connect
def _count(task_id: str | None = None, **_: Any) -> None:
    r, prefix = _redis()
    r.incr(f"{prefix}:executions:{task_id}")


@signals.task_postrun.connect
def _crash_before_ack(task_id: str | None = None, state: str | None = None, **_: Any) -> None:
    r, prefix = _redis()
    if state == "SUCCESS" and r.delete(f"{prefix}:crash-after:{task_id}"):
        os.killpg(os.getpgid(0), signal.SIGKILL)
