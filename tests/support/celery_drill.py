"""A throw-away agentrt cluster for the worker drills and the benchmark: real Celery workers on a
real broker (Redis or RabbitMQ), a PostgreSQL schema, a Redis lease, one shared base_dir.

Every name is unique per cluster (queue, Redis key prefix, RabbitMQ vhost, tenant, SQL schema),
so drills can run beside other users of the same servers; `close()` removes them all.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

from agent.config import AgentSettings, load_settings
from agent.errors import SessionNotFound
from agent.session.inbox import Inbox, Turn
from agent.session.stores.sql import SqlSessionStore
from agent.submit import TurnHandle, submit_turn
from tests.support.runners import ROOT, make_config

REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
DATABASE_URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
RABBIT_URL = os.environ.get("AGENTRT_RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672")
BROKERS = ("redis", "rabbitmq")


def turn_script(turns: int, tools: tuple[str, ...] = ("bump",)) -> list[dict[str, Any]]:
    """Scripted model responses for `turns` turns of one session: plan, one call per tool, "Answer n."."""
    out: list[dict[str, Any]] = []
    for n in range(1, turns + 1):
        out.append({"content": json.dumps({"plan": "Use the tools, then answer.", "todos": ["Use the tools"]})})
        for tool in tools:
            args = {"note": f"turn {n}"} if tool.startswith("bump") else {}
            out.append({"tool_calls": [{"name": tool, "args": args}]})
        out.append({"content": f"Answer {n}."})
    return out


def _rabbitmqctl(*args: str) -> bool:
    if shutil.which("rabbitmqctl") is None:
        return False
    done = subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, timeout=60, check=False)
    return done.returncode == 0


@dataclass
class Cluster:
    """What one drill created; start workers, submit turns, read back what happened."""

    tmp: Path
    broker: str
    config: Path
    settings: AgentSettings
    tenant: str
    keys: str
    env: dict[str, str]
    redis: redis.Redis
    schema: str
    vhost: str | None
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start_worker(
        self,
        name: str,
        concurrency: int = 2,
        hooks: bool = True,
        other_graph: bool = False,
        config: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """`celery -A agent.worker worker` as a user starts it, in its own process group; with
        `other_graph`, a worker whose graph has one more node (another graph version:
        tests/support/hooked_celery.py); with `config`, under that config file instead."""
        celery = "tests.support.hooked_celery" if other_graph else "celery"
        cmd = [
            sys.executable, "-m", celery, "-A", "agent.worker", "worker",
            "-Q", self.settings.workers.queue, "--concurrency", str(concurrency),
            "--hostname", f"{name}-{self.tenant}@%h", "--loglevel", "INFO",
            "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        if hooks:
            cmd += ["--include", "tests.support.celery_hooks"]
        log = (self.tmp / f"{name}.log").open("ab")
        env = self.env if config is None else {**self.env, "AGENTRT_CONFIG": str(config)}
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)
        self.workers[name] = proc
        return proc

    def signal_worker(self, name: str, sig: int, group: bool = False) -> None:
        """Send `sig` to a worker's main process (or its whole process group)."""
        proc = self.workers[name]
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)

    def stop_all(self) -> None:
        """SIGKILL every worker process group still running."""
        for proc in self.workers.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            else:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # pool processes a dead main left behind
                except ProcessLookupError:
                    pass

    def submit(self, sid: str, text: str, turn_id: str | None = None) -> TurnHandle:
        """`runner.submit` without building a runner (what a thin producer does); the session's
        first submit creates it (`new_session`)."""
        try:
            return submit_turn(self.settings, text, sid, self.tenant, None, turn_id)
        except SessionNotFound:
            return submit_turn(self.settings, text, sid, self.tenant, None, turn_id, new_session=True)

    def inbox(self, sid: str) -> Inbox:
        """A session's inbox."""
        return Inbox(self.settings.base_dir, self.tenant, sid)

    def turns(self, sid: str) -> list[Turn]:
        """A session's turns in submission order."""
        return self.inbox(sid).turns()

    def log_tail(self, chars: int = 3000) -> str:
        """The end of every worker log (for assertion messages)."""
        parts = []
        for path in sorted(self.tmp.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def close(self) -> None:
        """Stop the workers and remove every name the cluster created."""
        self.stop_all()
        prefix = self.settings.workers.key_prefix
        for pattern in (f"{prefix}*", f"{self.keys}:*", f"agentrt:{self.tenant}:*", f"drain:agentrt:{self.tenant}:*"):
            for key in self.redis.scan_iter(match=pattern, count=1000):
                self.redis.delete(key)
        self.redis.close()
        if self.vhost:
            _rabbitmqctl("delete_vhost", self.vhost)
        engine = _engine()
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'))
        engine.dispose()


def _engine() -> sa.Engine:
    return sa.create_engine(DATABASE_URL.replace("postgresql://", "postgresql+psycopg://", 1))


def open_cluster(
    tmp: Path,
    broker: str,
    script: list[dict[str, Any]],
    *,
    visibility_timeout_s: float = 10.0,
    lease_ttl_s: float = 2.0,
    session: dict[str, Any] | None = None,
) -> Cluster:
    """Create the unique names and the config; no worker is started yet."""
    u = uuid.uuid4().hex[:10]
    schema = f"agentrt_celery_{u}"
    engine = _engine()
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    db_url = f"{DATABASE_URL}?options=-csearch_path%3D{schema}"
    SqlSessionStore(db_url, create=True).dispose()  # what `agentrt db init` does
    vhost = None
    if broker == "redis":
        broker_url = f"{REDIS_URL}/0"
    elif _rabbitmqctl("add_vhost", f"agentrt-{u}") and _rabbitmqctl(
        "set_permissions", "-p", f"agentrt-{u}", "guest", ".*", ".*", ".*"
    ):
        vhost = f"agentrt-{u}"
        broker_url = f"{RABBIT_URL}/{vhost}"
    else:  # no rabbitmqctl here: the default vhost, with the unique queue name
        broker_url = f"{RABBIT_URL}//"
    keys = f"agentrt-test:celery:{u}"
    workers = {
        "broker_url": broker_url,
        "result_backend": f"{REDIS_URL}/0",
        "queue": f"agentrt-test-{u}",
        "key_prefix": f"{keys}:celery:",
        "visibility_timeout_s": visibility_timeout_s,
        "restore_interval_s": 1.0,
        "soft_shutdown_s": 10.0,
    }
    config = make_config(
        tmp,
        script,
        base="production.yaml",
        persistence={"redis_url": REDIS_URL, "database_url": db_url, "lease_ttl_s": lease_ttl_s},
        tools={
            "builtins": [],
            "custom": [
                {"path": "tests.support.worker_tools:bump", "effect": "unsafe"},
                {"path": "tests.support.worker_tools:gate", "effect": "read_only"},
                {"path": "tests.support.worker_tools:nap", "effect": "read_only"},
                {"path": "tests.support.worker_tools:bump", "name": "bump_approved", "requires_approval": True},
            ],
        },
        workers=workers,
        session=session or {},
        datasets=[],
        skills_dir=None,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    env.update(
        AGENTRT_CONFIG=str(config),
        AGENTRT_TEST_KEYS=keys,
        AGENTRT_REDIS_URL=REDIS_URL,
        PYTHONPATH=str(ROOT),
        AGENTRT_LOG_LEVEL="INFO",
    )
    os.environ["AGENTRT_TEST_KEYS"] = keys
    settings = load_settings(config)
    r = redis.Redis.from_url(REDIS_URL)
    return Cluster(tmp, broker, config, settings, f"tc{u}", keys, env, r, schema, vhost)


def wait_all(handles: list[TurnHandle], timeout: float) -> list[Turn]:
    """Wait for every handle (one shared deadline)."""
    deadline = time.monotonic() + timeout
    return [h.wait(timeout=max(0.1, deadline - time.monotonic())) for h in handles]
