"""A worker process: takes session jobs from a shared Redis queue and runs or resumes them.

    python -m agent.worker --config configs/production.yaml --queue default [--max-jobs N] [--idle-timeout S]

A job is JSON `{"session_id", "tenant_id", "text"}` (optional `user_id`, `job_id`). Keys, under
`agentrt:queue:<name>`:

    :pending               list; producers LPUSH, workers BLMOVE the right end into their own list
    :processing:<worker>   the jobs a worker has taken and not yet finished
    :worker:<worker>       heartbeat (expires `heartbeat_ttl` seconds after the worker stops beating)
    :workers               set of workers that may own a processing list
    :delayed               sorted set of jobs to retry later (score: unix time), e.g. on LeaseHeld
    :job:<job_id>          hash: baseline run id, attempts, status, result (kept 7 days once finished)
    :results               list of finished jobs (JSON), newest last (the last 10,000)

Exactly once: a job is moved, never copied, between these lists (atomically); a worker whose
heartbeat expired has its processing list moved back to `:pending` by any other worker, and the
survivor RESUMES the session (`AgentRunner.resume`) when its checkpoint has next nodes; the job
hash records the session's last run id before the first attempt, so a job whose run already
finished is acknowledged, never run as a second turn. The session lease (Redis, fenced) keeps two
workers off one session; a held lease sends the job to `:delayed`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import redis
from langchain_core.runnables import RunnableConfig

from agent.errors import AgentRuntimeError, ConfigError, LeaseHeld, SessionNotFound, StorageError
from agent.runner import AgentRunner

log = logging.getLogger("agentrt.worker")
DEFAULT_PREFIX = "agentrt:queue"
JOB_TTL_S = 7 * 24 * 3600  # how long a finished job is remembered (a re-delivery is recognised)
RESULTS_KEPT = 10_000

_PROMOTE = """
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, v in ipairs(items) do
  redis.call('ZREM', KEYS[1], v)
  redis.call('RPUSH', KEYS[2], v)
end
return #items
"""
_DELAY = """
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
return redis.call('LREM', KEYS[2], 1, ARGV[2])
"""


@dataclass(frozen=True)
class Job:
    """One session turn to run: what a producer pushes onto the queue."""

    session_id: str
    tenant_id: str
    text: str
    job_id: str
    user_id: str | None = None

    @classmethod
    def parse(cls, raw: str) -> Job:
        """Decode a queue entry; its id defaults to a digest of the entry, stable across re-queues."""
        try:
            data = json.loads(raw)
            sid, tenant, text = str(data["session_id"]), str(data["tenant_id"]), str(data["text"])
        except (ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"bad job {raw[:200]!r}: need JSON with session_id, tenant_id, text ({err})") from None
        job_id = str(data.get("job_id") or "j-" + hashlib.sha256(raw.encode()).hexdigest()[:24])
        user = data.get("user_id")
        return cls(sid, tenant, text, job_id, str(user) if user else None)


class JobQueue:
    """The Redis keys of one named queue and the atomic moves between them."""

    def __init__(self, client: redis.Redis, name: str, prefix: str = DEFAULT_PREFIX) -> None:
        self.r = client
        self.base = f"{prefix}:{name}"
        self.pending = f"{self.base}:pending"
        self.delayed = f"{self.base}:delayed"
        self.workers = f"{self.base}:workers"
        self.results = f"{self.base}:results"
        self._promote = client.register_script(_PROMOTE)
        self._delay = client.register_script(_DELAY)

    def processing(self, worker_id: str) -> str:
        """The processing list of a worker."""
        return f"{self.base}:processing:{worker_id}"

    def heartbeat_key(self, worker_id: str) -> str:
        """The heartbeat key of a worker."""
        return f"{self.base}:worker:{worker_id}"

    def job_key(self, job_id: str) -> str:
        """The state hash of a job."""
        return f"{self.base}:job:{job_id}"

    def push(self, job: dict[str, Any]) -> None:
        """Enqueue a job (JSON object with session_id, tenant_id, text)."""
        self.r.lpush(self.pending, json.dumps(job, sort_keys=True))

    def pop(self, worker_id: str, timeout_s: int) -> str | None:
        """Take the oldest pending job into the worker's processing list (waits up to `timeout_s`)."""
        raw = self.r.blmove(self.pending, self.processing(worker_id), timeout_s, "RIGHT", "LEFT")
        return _text(raw) if raw is not None else None

    def ack(self, worker_id: str, raw: str) -> None:
        """The job is finished: drop it from the worker's processing list."""
        self.r.lrem(self.processing(worker_id), 1, raw)

    def delay(self, worker_id: str, raw: str, seconds: float) -> None:
        """Move the job from the worker's processing list to the retry set."""
        self._delay(keys=[self.delayed, self.processing(worker_id)], args=[time.time() + seconds, raw])

    def promote_due(self) -> int:
        """Move retry jobs whose time has come back to the front of the queue."""
        return int(self._promote(keys=[self.delayed, self.pending], args=[time.time()]))

    def beat(self, worker_id: str, ttl_s: float) -> None:
        """Register the worker and refresh its heartbeat."""
        info = json.dumps({"host": socket.gethostname(), "pid": os.getpid()})
        pipe = self.r.pipeline()
        pipe.sadd(self.workers, worker_id)
        pipe.set(self.heartbeat_key(worker_id), info, px=max(1, int(ttl_s * 1000)))
        pipe.execute()

    def requeue_from(self, worker_id: str) -> int:
        """Move every job of a worker's processing list back to the front of the queue."""
        moved = 0
        while self.r.lmove(self.processing(worker_id), self.pending, "RIGHT", "RIGHT") is not None:
            moved += 1
        return moved

    def reap_dead(self, self_id: str) -> int:
        """Re-queue the jobs of workers whose heartbeat expired; returns how many moved."""
        moved = 0
        for member in self.r.smembers(self.workers):
            wid = _text(member)
            if wid == self_id or self.r.exists(self.heartbeat_key(wid)):
                continue
            n = self.requeue_from(wid)
            if n:
                log.warning("worker %s is gone (heartbeat expired): re-queued %d job(s)", wid, n)
            self.r.srem(self.workers, wid)
            moved += n
        return moved

    def has_work(self, self_id: str) -> bool:
        """Whether any job is pending, delayed, or taken by another worker."""
        if self.r.llen(self.pending) or self.r.zcard(self.delayed):
            return True
        return any(self.r.llen(self.processing(_text(w))) for w in self.r.smembers(self.workers) if _text(w) != self_id)

    def leave(self, worker_id: str) -> None:
        """Unregister a worker that stops with an empty processing list."""
        if not self.r.llen(self.processing(worker_id)):
            self.r.srem(self.workers, worker_id)
        self.r.delete(self.heartbeat_key(worker_id))


class Worker:
    """Pops jobs and runs them with one AgentRunner until told to stop."""

    def __init__(
        self,
        runner: AgentRunner,
        queue: JobQueue,
        worker_id: str | None = None,
        max_jobs: int | None = None,
        idle_timeout_s: float | None = None,
        heartbeat_ttl_s: float = 10.0,
        retry_delay_s: float = 1.0,
        max_attempts: int = 3,
    ) -> None:
        self.runner = runner
        self.queue = queue
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.max_jobs = max_jobs
        self.idle_timeout_s = idle_timeout_s
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.retry_delay_s = retry_delay_s
        self.max_attempts = max_attempts
        self.stopping = threading.Event()
        self.outcomes: dict[str, int] = {}
        self.finished = 0

    def stop(self, *_: Any) -> None:
        """Finish the current job, then exit the loop (SIGTERM / SIGINT)."""
        self.stopping.set()

    def _beat_loop(self) -> None:
        while not self.stopping.wait(self.heartbeat_ttl_s / 3):
            try:
                self.queue.beat(self.worker_id, self.heartbeat_ttl_s)
            except redis.RedisError as err:
                log.warning("worker %s: heartbeat failed: %s", self.worker_id, err)

    def run(self) -> dict[str, Any]:
        """The loop; returns a summary {worker_id, finished, outcomes}."""
        q = self.queue
        q.beat(self.worker_id, self.heartbeat_ttl_s)
        # A restart under the same id takes back what its previous life had taken.
        q.requeue_from(self.worker_id)
        beat = threading.Thread(target=self._beat_loop, name="agentrt-worker-heartbeat", daemon=True)
        beat.start()
        idle_since = time.monotonic()
        try:
            while not self.stopping.is_set():
                if self.max_jobs is not None and self.finished >= self.max_jobs:
                    break
                q.reap_dead(self.worker_id)
                q.promote_due()
                raw = q.pop(self.worker_id, 1)
                if raw is None:
                    if q.has_work(self.worker_id):
                        idle_since = time.monotonic()
                    elif self.idle_timeout_s is not None and time.monotonic() - idle_since >= self.idle_timeout_s:
                        break
                    continue
                idle_since = time.monotonic()
                self._count(self.process(raw))
        finally:
            self.stopping.set()
            beat.join(timeout=5)
            q.leave(self.worker_id)
        return {"worker_id": self.worker_id, "finished": self.finished, "outcomes": dict(self.outcomes)}

    def _count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if outcome != "delayed":
            self.finished += 1

    def process(self, raw: str) -> str:
        """Run, resume or acknowledge one job; returns the outcome name."""
        try:
            job = Job.parse(raw)
        except ConfigError as err:
            log.error("worker %s: dropping a malformed job: %s", self.worker_id, err)
            self.queue.r.rpush(f"{self.queue.base}:dead", raw)
            self.queue.ack(self.worker_id, raw)
            return "malformed"
        key = self.queue.job_key(job.job_id)
        state = {_text(k): _text(v) for k, v in self.queue.r.hgetall(key).items()}
        if state.get("status") in ("done", "failed"):
            self.queue.ack(self.worker_id, raw)
            return "duplicate"
        ctx = {"job": job.job_id, "session": job.session_id, "tenant": job.tenant_id, "worker": self.worker_id}
        try:
            outcome, result = self._execute(job, key, state)
        except LeaseHeld as err:
            log.info("job %s: session %s is busy (%s); retrying later", job.job_id, job.session_id, err.holder)
            self.queue.delay(self.worker_id, raw, self.retry_delay_s)
            return "delayed"
        except (StorageError, redis.RedisError) as err:
            return self._retry_or_fail(job, raw, key, ctx, err)
        except AgentRuntimeError as err:
            outcome, result = "failed", {"status": "FAILED", "error": str(err)}
        except Exception as err:  # a bug must not lose the job silently nor loop forever
            return self._retry_or_fail(job, raw, key, ctx, err)
        status = "failed" if outcome == "failed" else "done"
        self._record(job, key, status, outcome, result)
        self.queue.ack(self.worker_id, raw)
        log.info("job %s (session %s): %s on %s", job.job_id, job.session_id, outcome, self.worker_id)
        return outcome

    def _execute(self, job: Job, key: str, state: dict[str, str]) -> tuple[str, dict[str, Any]]:
        runner = self.runner
        # L1 is this process's cache: another worker may have moved the session on since.
        runner.manager.l1.delete(job.tenant_id, job.session_id)
        try:
            session = runner.manager.get(job.tenant_id, job.session_id, job.user_id)
        except SessionNotFound:
            session = None
        thread: RunnableConfig = {"configurable": {"thread_id": job.session_id, "tenant_id": job.tenant_id}}
        snap = runner.graph.get_state(thread)
        baseline = state.get("baseline")
        last_run = (session.last_run_id if session else None) or ""
        started = baseline is not None and last_run != baseline
        if started and snap.next:
            if snap.interrupts:
                return "awaiting_approval", runner.result(job.session_id, job.tenant_id).to_json()
            result = runner.resume(job.session_id, job.tenant_id, job.user_id)
            return "resumed", result.to_json()
        checkpoint_run = (snap.metadata or {}).get("run_id")
        if started and session is not None and (session.last_run_status != "RUNNING" or checkpoint_run == last_run):
            return "already_done", runner.result(job.session_id, job.tenant_id).to_json()
        if baseline is None:
            self.queue.r.hsetnx(key, "baseline", last_run)
        self.queue.r.hset(key, mapping={"worker": self.worker_id, "status": "running"})
        result = runner.run(job.text, session_id=job.session_id, tenant_id=job.tenant_id, user_id=job.user_id)
        return "ran", result.to_json()

    def _retry_or_fail(self, job: Job, raw: str, key: str, ctx: dict[str, str], err: Exception) -> str:
        attempts = int(self.queue.r.hincrby(key, "attempts", 1))
        if attempts < self.max_attempts:
            log.warning("job %s: attempt %d failed (%s: %s); retrying", ctx["job"], attempts, type(err).__name__, err)
            self.queue.delay(self.worker_id, raw, self.retry_delay_s * attempts)
            return "delayed"
        log.error("job %s: giving up after %d attempts: %s", ctx["job"], attempts, err)
        self._record(job, key, "failed", "failed", {"status": "FAILED", "error": f"{type(err).__name__}: {err}"})
        self.queue.ack(self.worker_id, raw)
        return "failed"

    def _record(self, job: Job, key: str, status: str, outcome: str, result: dict[str, Any]) -> None:
        summary = {
            "job_id": job.job_id,
            "session_id": job.session_id,
            "tenant_id": job.tenant_id,
            "worker_id": self.worker_id,
            "outcome": outcome,
            "status": result.get("status"),
            "run_id": result.get("run_id"),
            "error": result.get("error"),
        }
        pipe = self.queue.r.pipeline()
        pipe.hset(key, mapping={"status": status, "result": json.dumps(summary, default=str)})
        pipe.expire(key, JOB_TTL_S)
        pipe.rpush(self.queue.results, json.dumps(summary, default=str))
        pipe.ltrim(self.queue.results, -RESULTS_KEPT, -1)
        pipe.execute()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def build_parser() -> argparse.ArgumentParser:
    """The `python -m agent.worker` command line."""
    p = argparse.ArgumentParser(prog="python -m agent.worker", description="Run session jobs from a Redis queue.")
    p.add_argument("--config", help="YAML config (e.g. configs/production.yaml); needs persistence.redis_url")
    p.add_argument("--queue", required=True, help="queue name (keys agentrt:queue:<name>:*)")
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help="Redis key prefix of the queues")
    p.add_argument("--worker-id", help="stable id of this worker (default: host-pid-random)")
    p.add_argument("--max-jobs", type=int, help="stop after finishing this many jobs")
    p.add_argument("--idle-timeout", type=float, help="stop after this many seconds with no work anywhere")
    p.add_argument("--heartbeat-ttl", type=float, default=10.0, help="seconds until a silent worker counts as dead")
    p.add_argument("--retry-delay", type=float, default=1.0, help="seconds before a busy session's job is retried")
    p.add_argument("--enqueue", metavar="JSON", action="append", help="push this job and exit (repeatable)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the worker loop (or `--enqueue` jobs); prints a JSON summary line."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("AGENTRT_LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        runner = AgentRunner.from_config(args.config)
        url = runner.settings.persistence.redis_url
        if not url:
            raise ConfigError("the worker needs Redis: set persistence.redis_url or AGENTRT_REDIS_URL")
        queue = JobQueue(redis.Redis.from_url(url), args.queue, args.prefix)
        if args.enqueue:
            for item in args.enqueue:
                Job.parse(item)
                queue.r.lpush(queue.pending, item)
            print(json.dumps({"enqueued": len(args.enqueue)}))
            return 0
        worker = Worker(
            runner, queue, args.worker_id, args.max_jobs, args.idle_timeout, args.heartbeat_ttl, args.retry_delay
        )
        _on_signals(worker)
        summary = worker.run()
    except (AgentRuntimeError, redis.RedisError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(summary, sort_keys=True))
    return 0


def _on_signals(worker: Worker) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


if __name__ == "__main__":
    sys.exit(main())
