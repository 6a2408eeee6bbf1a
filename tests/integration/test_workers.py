"""Two worker processes on one Redis, one PostgreSQL and one base_dir share a queue of sessions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from agent.runner import AgentRunner
from agent.session.lease import RedisLease
from agent.session.stores.sql import SqlSessionStore
from agent.worker import Job, JobQueue, Worker
from tests.support.runners import ROOT, make_config

pytestmark = pytest.mark.integration

REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
DATABASE_URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
N_SESSIONS = 6
BOUND_S = 120.0
ANSWER = "Counted once and passed the gate."
SCRIPT: list[dict[str, Any]] = [
    {"content": json.dumps({"plan": "Bump the counter, pass the gate, answer.", "todos": ["Bump", "Pass the gate"]})},
    {"tool_calls": [{"name": "bump", "args": {"note": "once"}}]},
    {"tool_calls": [{"name": "gate", "args": {}}]},
    {"content": ANSWER},
]


@dataclass
class Drill:
    """Everything one drill created, with unique names so tests can run side by side."""

    config: Path
    tenant: str
    queue: JobQueue
    keys: str
    redis: redis.Redis
    env: dict[str, str]


def _engine() -> sa.Engine:
    return sa.create_engine(DATABASE_URL.replace("postgresql://", "postgresql+psycopg://", 1))


@pytest.fixture
def drill(tmp_path: Path) -> Iterator[Drill]:
    """A fresh PostgreSQL schema, unique Redis names, and a production-based config on tmp_path."""
    u = uuid.uuid4().hex[:10]
    schema = f"agentrt_workers_{u}"
    engine = _engine()
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    db_url = f"{DATABASE_URL}?options=-csearch_path%3D{schema}"
    SqlSessionStore(db_url, create=True).dispose()  # what `agentrt db init` does
    config = make_config(
        tmp_path,
        SCRIPT,
        base="production.yaml",
        persistence={"redis_url": REDIS_URL, "database_url": db_url, "lease_ttl_s": 2},
        tools={
            "custom": [
                {"path": "tests.support.worker_tools:bump", "effect": "unsafe"},
                {"path": "tests.support.worker_tools:gate", "effect": "read_only"},
            ]
        },
    )
    r = redis.Redis.from_url(REDIS_URL)
    keys = f"agentrt-test:workers:{u}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    env.update(AGENTRT_TEST_KEYS=keys, AGENTRT_REDIS_URL=REDIS_URL, PYTHONPATH=str(ROOT))
    d = Drill(config, f"tw{u}", JobQueue(r, f"test-{u}"), keys, r, env)
    try:
        yield d
    finally:
        for pattern in (f"{d.queue.base}:*", f"{keys}:*", f"agentrt:{d.tenant}:*"):
            for key in r.scan_iter(match=pattern, count=500):
                r.delete(key)
        r.close()
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def _start_worker(d: Drill, log: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "agent.worker",
        "--config",
        str(d.config),
        "--queue",
        d.queue.base.rsplit(":", 1)[1],
        "--idle-timeout",
        "3",
        "--heartbeat-ttl",
        "2",
        "--retry-delay",
        "0.3",
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=d.env, stdout=subprocess.PIPE, stderr=log.open("wb"), start_new_session=True
    )


def _wait_for(predicate: Any, what: str) -> Any:
    deadline = time.monotonic() + BOUND_S
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def _events(runner: AgentRunner, tenant: str, sid: str) -> list[str]:
    return [e.type for e in runner.manager.jsonl.event_log(tenant, sid).entries()]


def test_every_session_runs_once_and_a_killed_workers_session_resumes_on_the_other(
    drill: Drill, tmp_path: Path
) -> None:
    """Each queued session completes exactly once; the one whose worker was SIGKILLed is resumed by the survivor."""
    d = drill
    sessions = [f"s-{d.tenant}-{i}" for i in range(N_SESSIONS)]
    victim = sessions[0]
    d.redis.set(f"{d.keys}:gate:{victim}", "closed")
    for sid in sessions:
        d.queue.push({"session_id": sid, "tenant_id": d.tenant, "text": f"count for {sid}"})
    workers = [_start_worker(d, tmp_path / f"worker{i}.log") for i in range(2)]
    try:
        pid = int(_wait_for(lambda: d.redis.get(f"{d.keys}:reached:{victim}"), "the victim to reach its gate"))
        killed = next(w for w in workers if w.pid == pid)
        survivor = next(w for w in workers if w is not killed)
        os.killpg(killed.pid, signal.SIGKILL)  # mid-run: the bump is journaled, the gate call is not
        killed.wait(timeout=BOUND_S)
        d.redis.delete(f"{d.keys}:gate:{victim}")
        out, _ = survivor.communicate(timeout=BOUND_S)
    finally:
        for w in workers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
                w.wait(timeout=30)
    assert killed.returncode == -signal.SIGKILL
    assert survivor.returncode == 0, (tmp_path / "worker0.log").read_text()[-2000:]
    summary = json.loads(out.decode().strip().splitlines()[-1])
    assert summary["outcomes"].get("resumed") == 1

    results = [json.loads(x) for x in d.redis.lrange(d.queue.results, 0, -1)]
    by_session: dict[str, list[dict[str, Any]]] = {}
    for res in results:
        by_session.setdefault(res["session_id"], []).append(res)
    assert sorted(by_session) == sorted(sessions)
    assert all(len(v) == 1 and v[0]["status"] == "COMPLETED" for v in by_session.values()), by_session
    assert by_session[victim][0]["outcome"] == "resumed"
    assert by_session[victim][0]["worker_id"] == summary["worker_id"]

    runner = AgentRunner.from_config(d.config)
    for sid in sessions:
        result = runner.result(sid, d.tenant)
        assert (result.status, result.answer) == ("COMPLETED", ANSWER), sid
        assert runner.manager.get(d.tenant, sid).last_run_status == "COMPLETED"
        events = _events(runner, d.tenant, sid)
        assert events.count("run_end") == 1 and events.count("run_start") == 1, (sid, events)
        assert events.count("run_resume") == (1 if sid == victim else 0), (sid, events)
        assert int(d.redis.get(f"{d.keys}:bump:{sid}") or 0) == 1, f"the unsafe tool of {sid} ran more than once"
    # The PostgreSQL layer holds every session too (PRIMARY mode projects there).
    sql = runner.manager.sql
    assert sql is not None
    assert sorted(s.session_id for s in sql.list(d.tenant)) == sorted(sessions)
    # Nothing is left in the queue, and the dead worker's processing list was taken back.
    assert d.redis.llen(d.queue.pending) == 0 and d.redis.zcard(d.queue.delayed) == 0
    assert not list(d.redis.scan_iter(match=f"{d.queue.base}:processing:*"))


def _in_process_worker(d: Drill, monkeypatch: pytest.MonkeyPatch) -> tuple[AgentRunner, Worker]:
    monkeypatch.setenv("AGENTRT_TEST_KEYS", d.keys)
    runner = AgentRunner.from_config(d.config)
    return runner, Worker(runner, d.queue, worker_id=f"w-{d.tenant}", retry_delay_s=0.0)


def test_a_job_delivered_again_after_its_run_finished_is_acknowledged_not_run_twice(
    drill: Drill, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-delivered job (crash before the ack, or before its result was recorded) never starts a second turn."""
    d = drill
    runner, worker = _in_process_worker(d, monkeypatch)
    sid = f"s-{d.tenant}-again"
    d.queue.push({"session_id": sid, "tenant_id": d.tenant, "text": "count once"})
    raw = d.queue.pop(worker.worker_id, 1)
    assert raw is not None
    assert worker.process(raw) == "ran"
    d.redis.lpush(d.queue.processing(worker.worker_id), raw)  # delivered again before the ack
    assert worker.process(raw) == "duplicate"
    d.redis.hset(d.queue.job_key(Job.parse(raw).job_id), "status", "running")  # died before recording
    d.redis.lpush(d.queue.processing(worker.worker_id), raw)
    assert worker.process(raw) == "already_done"
    events = _events(runner, d.tenant, sid)
    assert events.count("run_start") == 1 and events.count("run_end") == 1
    assert int(d.redis.get(f"{d.keys}:bump:{sid}") or 0) == 1
    assert d.redis.llen(d.queue.processing(worker.worker_id)) == 0


def test_a_job_whose_session_lease_is_held_waits_and_runs_once_the_lease_is_free(
    drill: Drill, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LeaseHeld sends the job to the retry set instead of failing it; it runs after the holder lets go."""
    d = drill
    runner, worker = _in_process_worker(d, monkeypatch)
    sid = f"s-{d.tenant}-busy"
    lease = RedisLease(url=REDIS_URL)
    grant = lease.acquire(d.tenant, sid, "another-host:1:x", 30)
    d.queue.push({"session_id": sid, "tenant_id": d.tenant, "text": "count once"})
    raw = d.queue.pop(worker.worker_id, 1)
    assert raw is not None
    assert worker.process(raw) == "delayed"
    assert d.redis.zcard(d.queue.delayed) == 1 and d.redis.llen(d.queue.processing(worker.worker_id)) == 0
    lease.release(grant)
    assert d.queue.promote_due() == 1
    raw = d.queue.pop(worker.worker_id, 1)
    assert raw is not None and worker.process(raw) == "ran"
    assert runner.result(sid, d.tenant).status == "COMPLETED"
    assert int(d.redis.get(f"{d.keys}:bump:{sid}") or 0) == 1
