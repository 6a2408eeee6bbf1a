"""A throw-away agentrt cluster for the worker drills and the benchmark: real Celery workers on a
real broker (Redis or RabbitMQ), a PostgreSQL schema, a Redis lease, one shared base_dir.

With `store="postgres"` (the fleet drill) the cluster is a fleet instead: a fresh PostgreSQL
database per cluster holds every session record (`persistence.store: postgres`, made as
`agentrt db init` makes it), the lease is PostgreSQL's, and each worker runs on its own base_dir
(a local cache `wipe_base_dir` may delete while the worker is down); nothing else is shared.

Every name is unique per cluster (queue, Redis key prefix, RabbitMQ vhost, tenant, SQL schema or
database), so drills can run beside other users of the same servers; `close()` removes them all.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

from agent.core.config import AgentSettings, load_settings
from agent.core.errors import SessionNotFound
from agent.runner import AgentRunner
from agent.runner.submit import TurnHandle, submit_turn
from agent.session.db_cli import db_init
from agent.session.inbox import Inbox, Turn, TurnStatus
from agent.session.record_store import close_stores
from agent.session.record_store import inbox as record_inbox
from agent.session.stores.sql import SqlSessionStore
from tests.support.runners import ROOT, make_config
from tests.support.shell_env import environ_copy

REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
DATABASE_URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
RABBIT_URL = os.environ.get("AGENTRT_RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672")
BROKERS = ("redis", "rabbitmq")


ToolCall = tuple[str, dict[str, Any]]


def turn_script(
    turns: int, tools: tuple[str, ...] = ("bump",), calls: dict[int, list[ToolCall]] | None = None
) -> list[dict[str, Any]]:
    """Scripted model responses for `turns` turns of one session: plan, one call per tool, then turn
    n's own `calls` (name, args), "Answer n."."""
    out: list[dict[str, Any]] = []
    for n in range(1, turns + 1):
        out.append({"content": json.dumps({"plan": "Use the tools, then answer.", "todos": ["Use the tools"]})})
        for tool in tools:
            args = {"note": f"turn {n}"} if tool.startswith("bump") else {}
            out.append({"tool_calls": [{"name": tool, "args": args}]})
        for name, args in (calls or {}).get(n, []):
            out.append({"tool_calls": [{"name": name, "args": args}]})
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
    database: str | None = None
    """The cluster's own PostgreSQL database (`store="postgres"`), dropped by `close()`."""
    own_base_dirs: bool = False
    """Each worker on its own base_dir (`base_dir(name)`), not the config's shared one."""
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def base_dir(self, name: str) -> Path:
        """The base_dir worker `name` runs on."""
        return self.tmp / f"base-{name}" if self.own_base_dirs else self.settings.base_dir

    def wipe_base_dir(self, name: str) -> None:
        """Delete a (stopped) worker's own base_dir: what losing a machine's disk leaves."""
        assert self.own_base_dirs and self.workers[name].poll() is not None, f"{name} runs on a shared base_dir"
        shutil.rmtree(self.base_dir(name), ignore_errors=True)

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
        if self.own_base_dirs:
            env = {**env, "AGENTRT_BASE_DIR": str(self.base_dir(name))}
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
        """A session's inbox (on the cluster's record store)."""
        return record_inbox(self.settings, self.tenant, sid)

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
        if self.database:
            drop_database(self.database)


def _engine() -> sa.Engine:
    return sa.create_engine(DATABASE_URL.replace("postgresql://", "postgresql+psycopg://", 1))


def database_url(name: str) -> str:
    """The URL of database `name` on the test server."""
    return DATABASE_URL.rsplit("/", 1)[0] + f"/{name}"


def drop_database(name: str) -> None:
    """Drop a test database (`WITH (FORCE)`: workers a test killed may leave sessions behind),
    after closing this process's record-store pools."""
    close_stores()
    admin = _engine().execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def open_cluster(
    tmp: Path,
    broker: str,
    script: list[dict[str, Any]],
    *,
    visibility_timeout_s: float = 10.0,
    lease_ttl_s: float = 2.0,
    session: dict[str, Any] | None = None,
    store: str = "files",
    builtins: tuple[str, ...] = (),
) -> Cluster:
    """Create the unique names and the config; no worker is started yet. `store="postgres"`: a
    fleet (see the module docstring); `builtins`: agentrt's tools to enable beside the drill's."""
    u = uuid.uuid4().hex[:10]
    schema = f"agentrt_celery_{u}"
    database = None
    persistence: dict[str, Any] = {"redis_url": REDIS_URL, "lease_ttl_s": lease_ttl_s}
    if store == "postgres":
        database = f"agentrt_fleet_{u}"
        db_url = database_url(database)
        persistence.update(database_url=db_url, store="postgres")  # the lease: PostgreSQL's by default
    else:
        engine = _engine()
        with engine.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        engine.dispose()
        db_url = f"{DATABASE_URL}?options=-csearch_path%3D{schema}"
        persistence.update(store="files", lease="redis")  # one shared base_dir: the files store
        SqlSessionStore(db_url, create=True).dispose()  # what `agentrt db init` does
        persistence["database_url"] = db_url
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
        persistence=persistence,
        tools={
            "builtins": list(builtins),
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
    env = {k: v for k, v in environ_copy().items() if not k.startswith("AGENTRT_")}
    env.update(
        AGENTRT_CONFIG=str(config),
        AGENTRT_TEST_KEYS=keys,
        AGENTRT_REDIS_URL=REDIS_URL,
        PYTHONPATH=str(ROOT),
        AGENTRT_LOG_LEVEL="INFO",
    )
    os.environ["AGENTRT_TEST_KEYS"] = keys
    settings = load_settings(config)
    if database is not None:
        db_init(settings)  # `agentrt db init`: the database, the session table, the record store's tables
    r = redis.Redis.from_url(REDIS_URL)
    return Cluster(
        tmp,
        broker,
        config,
        settings,
        f"tc{u}",
        keys,
        env,
        r,
        schema,
        vhost,
        database,
        own_base_dirs=database is not None,
    )


def wait_all(handles: list[TurnHandle], timeout: float) -> list[Turn]:
    """Wait for every handle (one shared deadline)."""
    deadline = time.monotonic() + timeout
    return [h.wait(timeout=max(0.1, deadline - time.monotonic())) for h in handles]


def submit_sessions(c: Cluster, texts: dict[str, list[str]], threads: int = 4) -> dict[str, list[TurnHandle]]:
    """Submit every session's turns from `threads` submitting threads at once (each session's turns
    in order, the sessions interleaved); the handles by session."""
    handles: dict[str, list[TurnHandle]] = {sid: [] for sid in texts}
    sids = sorted(texts)
    errors: list[BaseException] = []

    def submitter(mine: list[str]) -> None:
        try:
            for n in range(max(len(t) for t in texts.values())):
                for sid in mine:
                    if n < len(texts[sid]):
                        handles[sid].append(c.submit(sid, texts[sid][n]))
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    running = [threading.Thread(target=submitter, args=(sids[k::threads],)) for k in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    assert not errors, errors
    return handles


def check_once_in_order(
    c: Cluster, texts: dict[str, list[str]], handles: dict[str, list[TurnHandle]], bound_s: float
) -> int:
    """Every turn COMPLETED exactly once, in submission order, answered "Answer n."; no unsafe
    effect (`bump`) twice in one run. Returns how many turns were resumed (attempts > 1)."""
    for hs in handles.values():
        for turn in wait_all(hs, bound_s):
            assert turn.status is TurnStatus.COMPLETED, (turn.to_json(), c.log_tail())
    runner = AgentRunner.from_config(c.config)
    resumed = 0
    for sid, expected in texts.items():
        turns = c.turns(sid)
        assert [t.text for t in turns] == expected
        assert [t.turn_id for t in turns] == [h.turn_id for h in handles[sid]]
        answers = [f"Answer {n}." for n in range(1, len(expected) + 1)]
        assert [t.result.get("answer") for t in turns] == answers, sid
        done = [r["turn_id"] for r in c.inbox(sid).records() if r["kind"] == "done"]
        assert sorted(done) == sorted(t.turn_id for t in turns), f"{sid}: a turn finished twice or never"
        run_ids = [t.result["run_id"] for t in turns]
        assert len(set(run_ids)) == len(expected)
        events = runner.manager.event_log(c.tenant, sid).entries()
        asked = [(e.payload["run_id"], e.payload["content"]) for e in events if e.type == "user_turn"]
        assert asked == list(zip(run_ids, expected, strict=True)), f"{sid}: turns out of order"
        ended = [e.payload["run_id"] for e in events if e.type == "run_end"]
        assert ended == run_ids, f"{sid}: run_end entries {ended}"
        for run_id in run_ids:
            assert int(c.redis.get(f"{c.keys}:bump-run:{run_id}") or 0) <= 1, f"{sid}: unsafe tool ran twice"
        resumed += sum(1 for t in turns if t.attempts > 1)
    return resumed


def running_on(c: Cluster, name: str, sids: list[str], since: float) -> bool:
    """Whether worker `name` started one of the sessions' turns after `since` and it still runs."""
    for sid in sids:
        for rec in c.inbox(sid).records():
            if rec["kind"] == "started" and str(rec.get("worker", "")).startswith(f"{name}-") and rec["ts"] > since:
                turn = next(t for t in c.turns(sid) if t.turn_id == rec["turn_id"])
                if turn.status is TurnStatus.RUNNING:
                    return True
    return False


def sigkill_mid_run(c: Cluster, name: str, sids: list[str], kills: int, bound_s: float, wipe: bool = False) -> None:
    """`kills` times: wait until worker `name` runs a turn, SIGKILL its whole process group at a
    random moment of it, (with `wipe`, delete its base_dir,) and start it again."""
    rng = random.Random()
    since = time.time()
    for kill in range(kills):
        deadline = time.monotonic() + bound_s
        while not running_on(c, name, sids, since):
            assert time.monotonic() < deadline, f"{name} never ran a turn before kill {kill + 1}\n{c.log_tail()}"
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.6))
        c.signal_worker(name, signal.SIGKILL, group=True)
        c.workers[name].wait(timeout=30)
        if wipe:
            c.wipe_base_dir(name)
        since = time.time()
        c.start_worker(name)
