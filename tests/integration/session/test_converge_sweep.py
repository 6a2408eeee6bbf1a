"""Debts of dead processes are paid without the session's next turn (agentrt/session/sweep.py).

Real servers: PostgreSQL and Redis, each reached through a cuttable TCP relay in this test
process, so cutting a relay is an outage of that layer only (the shared servers keep running);
every step is its own `agentrt` process (forked by a fork server that imported this checkout's
`agent.cli` once, `tests.support.zygote`, so a step does not pay the import time). A CLI run while
the layer is cut leaves a debt in the session's outbox and exits; the layer comes back; then, with
no command on that session, a running `agentrt serve`, a running Celery worker or
`agentrt store converge` replays it: the SQL row is at the session's newest version (a session
made during the outage gets its row), Redis no longer holds the stale copy, and `agentrt doctor`
says no session owes a layer. On the files store and on the PostgreSQL record store, with a
tenant of the test's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa
import yaml

from agent.core.config import load_settings
from agent.runner.services import build_lease
from agent.runner.turns import SessionHold
from tests.integration.test_stores_support import DATABASE_URL, REDIS_URL, Relay, pg_host_port
from tests.support.runners import ROOT, make_config
from tests.support.serve import serving
from tests.support.zygote import LAYERS, Outcome, Zygote

SCRIPT: list[dict[str, Any]] = [
    {"content": '{"plan": "add", "todos": ["add"]}'},
    {"tool_calls": [{"name": "calculator", "args": {"expression": "2 + 3"}}]},
    {"content": "the answer is 5"},
]
CONVERGE_EVERY_S = 1.0
BOUND_S = 60.0


def _host_port(url: str) -> tuple[str, int]:
    rest = url.split("//", 1)[-1].split("@", 1)[-1].split("/", 1)[0]
    host, _, port = rest.partition(":")
    return host, int(port or 6379)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """The fork server every `agentrt` command of this file's tests is forked from."""
    with Zygote(tmp_path_factory.mktemp("zygote"), LAYERS) as z:
        yield z


@pytest.fixture
def pg_relay() -> Iterator[Relay]:
    """A cuttable relay in front of the shared PostgreSQL."""
    r = Relay(*pg_host_port())
    r.restore()
    yield r
    r.cut()


@pytest.fixture
def redis_relay() -> Iterator[Relay]:
    """A cuttable relay in front of the shared Redis."""
    r = Relay(*_host_port(REDIS_URL))
    r.restore()
    yield r
    r.cut()


@pytest.fixture
def schema() -> Iterator[str]:
    """A PostgreSQL schema of this test's own (dropped with everything in it afterwards)."""
    name = f"agentrt_sweep_{uuid.uuid4().hex[:10]}"
    engine = _engine(DATABASE_URL)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    yield name
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
    engine.dispose()


@pytest.fixture
def tenant() -> Iterator[str]:
    """A tenant of the test's own (never `default`); its Redis keys are deleted afterwards."""
    name = f"acme-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"agentrt:{name}:*", count=1000):
        client.delete(key)
    client.close()


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def _url(base: str, schema: str) -> str:
    return f"{base}?options=-csearch_path%3D{schema}"


def _config(
    tmp_path: Path, store: str, tenant: str, schema: str, sql_url: str, redis_url: str, **persistence: Any
) -> Path:
    """A production.yaml-like config: PRIMARY, PostgreSQL L3 (`sql_url`), Redis L2 (`redis_url`), on
    `store`; the record store (postgres) reached directly, so only the layer behind a relay goes down."""
    queue = f"sweep-{uuid.uuid4().hex[:8]}"
    cfg = make_config(
        tmp_path,
        SCRIPT,
        base="production.yaml",
        model={"script": str(tmp_path / "script.yaml")},
        session={"tenant_id": tenant, "converge_every_s": CONVERGE_EVERY_S},
        persistence={
            "base_dir": str(tmp_path / "agentrt"),
            "database_url": _url(sql_url, schema),
            "redis_url": redis_url,
            "store": store,
            "store_url": _url(DATABASE_URL, schema) if store == "postgres" else None,
            "lease": "file" if store == "files" else "redis",
            "mode": "PRIMARY",
            **persistence,
        },
        workers={
            "broker_url": REDIS_URL,
            "result_backend": REDIS_URL,
            "queue": queue,
            "key_prefix": f"{queue}:",
        },
        serve={"runs_on": "server"},
    )
    # Every turn plays the same responses.
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": SCRIPT}))
    return cfg


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    return {**env, "PYTHONPATH": str(ROOT)}


@dataclass(frozen=True)
class Cli:
    """`agentrt ARGS --config cfg`, each command its own process, forked from `zygote`."""

    zygote: Zygote
    cfg: Path

    def __call__(self, *args: str) -> Outcome:
        """One `agentrt` process, run to its end."""
        return self.zygote.run([*args, "--config", str(self.cfg)], _env(), timeout=240, cwd=self.cfg.parent)


def _run(agentrt: Cli, *args: str) -> str:
    done = agentrt("run", "--json", *args)
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "COMPLETED", result
    return str(result["session_id"])


def _sql_version(schema: str, tenant: str, sid: str) -> int | None:
    engine = _engine(_url(DATABASE_URL, schema))
    try:
        with engine.connect() as conn:
            q = sa.text("SELECT version FROM sessions WHERE tenant_id = :t AND session_id = :s")
            got = conn.execute(q, {"t": tenant, "s": sid}).scalar_one_or_none()
    finally:
        engine.dispose()
    return None if got is None else int(got)


def _version(agentrt: Cli, sid: str) -> int:
    """The session's version as agentrt reports it (read once nothing is owed: no replay left)."""
    shown = agentrt("show", sid, "--json")
    assert shown.code == 0, shown.stderr
    return int(json.loads(shown.stdout)["session"]["version"])


def _outbox_check(agentrt: Cli) -> dict[str, Any]:
    done = agentrt("doctor", "--json")
    return next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "outbox")


def _wait(what: str, ok: Callable[[], bool], log: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.25)
    raise AssertionError(f"{what} did not happen within {BOUND_S}s\n{log()}")


def _sql_outage(
    zygote: Zygote, tmp_path: Path, store: str, tenant: str, schema: str, relay: Relay
) -> tuple[Cli, str, str, int]:
    """Session A made with PostgreSQL up; then, with it cut, a turn of A and a new session B, each
    a CLI run that exits. Returns (the CLI on its config, A, B, A's SQL version before the outage)."""
    agentrt = Cli(zygote, _config(tmp_path, store, tenant, schema, relay.url_for(DATABASE_URL), REDIS_URL))
    up = agentrt("db", "upgrade")
    assert up.code == 0, up.stderr
    a = _run(agentrt, "one")
    before = _sql_version(schema, tenant, a)
    assert before is not None

    relay.cut()
    assert _run(agentrt, "--session", a, "two") == a
    b = _run(agentrt, "fresh")
    assert _sql_version(schema, tenant, a) == before  # the exited run left SQL behind ...
    assert _sql_version(schema, tenant, b) is None  # ... and no row at all for B
    check = _outbox_check(agentrt)
    assert check["status"] == "WARN" and {a, b} <= set(check["evidence"]["sessions"]), check
    relay.restore()
    return agentrt, a, b, before


def _converged(agentrt: Cli, schema: str, tenant: str, a: str, b: str, before: int) -> None:
    """SQL holds both sessions at their newest version; the doctor says nothing is owed."""
    check = _outbox_check(agentrt)
    assert check["status"] == "OK", check
    shown = {sid: _version(agentrt, sid) for sid in (a, b)}
    for sid in (a, b):
        assert _sql_version(schema, tenant, sid) == shown[sid]
    assert shown[a] > before


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_serve_replays_what_sql_missed_while_a_cli_run_exited(
    zygote: Zygote, tmp_path: Path, pg_relay: Relay, schema: str, tenant: str, store: str
) -> None:
    """PostgreSQL cut during CLI runs that exit; back; a running `agentrt serve` (no request) pays."""
    agentrt, a, b, before = _sql_outage(zygote, tmp_path, store, tenant, schema, pg_relay)
    with serving(agentrt.cfg, tmp_path) as server:
        _wait(
            "serve replaying the SQL debts",
            lambda: _sql_version(schema, tenant, b) is not None and _sql_version(schema, tenant, a) != before,
            lambda: server.log.read_text()[-3000:],
        )
    _converged(agentrt, schema, tenant, a, b, before)


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_an_idle_worker_replays_what_sql_missed(
    zygote: Zygote, tmp_path: Path, pg_relay: Relay, schema: str, tenant: str, store: str
) -> None:
    """The same outage; a Celery worker with no task to run pays the debts."""
    agentrt, a, b, before = _sql_outage(zygote, tmp_path, store, tenant, schema, pg_relay)
    queue = yaml.safe_load(agentrt.cfg.read_text())["workers"]["queue"]
    log = tmp_path / "worker.log"
    cmd = [sys.executable, "-m", "celery", "-A", "agent.worker", "worker", "-Q", queue, "--concurrency", "1"]
    cmd += ["--hostname", f"{queue}@%h", "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**_env(), "AGENTRT_CONFIG": str(agentrt.cfg)},
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        _wait(
            "the worker replaying the SQL debts",
            lambda: _sql_version(schema, tenant, b) is not None and _sql_version(schema, tenant, a) != before,
            lambda: log.read_text()[-3000:],
        )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    _converged(agentrt, schema, tenant, a, b, before)


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_store_converge_replays_what_redis_missed(
    zygote: Zygote, tmp_path: Path, redis_relay: Relay, schema: str, tenant: str, store: str
) -> None:
    """Redis cut during a CLI run that exits leaves the older copy cached; `agentrt store converge
    --tenant T` removes it, says what it replayed, and a second run finds nothing owed."""
    extra = {"lease": "postgres"} if store == "postgres" else {}
    cfg = _config(tmp_path, store, tenant, schema, DATABASE_URL, redis_relay.url_for(REDIS_URL), **extra)
    agentrt = Cli(zygote, cfg)
    up = agentrt("db", "upgrade")
    assert up.code == 0, up.stderr
    sid = _run(agentrt, "one")
    client = redis.Redis.from_url(REDIS_URL)
    key = f"agentrt:{tenant}:session:{sid}"
    try:
        _run(agentrt, "--session", sid, "again")  # a read fills Redis with the copy of turn one's end
        cached = client.get(key)
        assert cached is not None

        redis_relay.cut()
        _run(agentrt, "--session", sid, "two")
        stale = json.loads(client.get(key) or b"{}")
        assert stale, "the cached copy went away during the outage"
        redis_relay.restore()

        other = agentrt("store", "converge", "--tenant", "someone-else")
        assert other.code == 0, other.stderr
        assert "no session owes" in other.stdout
        assert client.get(key) is not None  # another tenant's converge left it

        done = agentrt("store", "converge", "--tenant", tenant)
        assert done.code == 0, done.stderr
        assert f"replayed {tenant}/{sid}: L2" in done.stdout, done.stdout
        now = client.get(key)
        assert now is None or json.loads(now)["version"] > stale["version"]
        assert _version(agentrt, sid) > stale["version"]
        again = agentrt("store", "converge", "--json")
        assert again.code == 0, again.stderr
        assert json.loads(again.stdout)["sessions"] == []
        assert _outbox_check(agentrt)["status"] == "OK"
    finally:
        client.close()


def test_store_converge_leaves_a_held_session_and_a_layer_still_down(
    zygote: Zygote, tmp_path: Path, pg_relay: Relay, schema: str, tenant: str
) -> None:
    """While PostgreSQL is still cut, `store converge` replays nothing and exits 6; while a run holds
    the session, it skips it (exit 4, SQL untouched); once free, it replays it (exit 0)."""
    cfg = _config(tmp_path, "files", tenant, schema, pg_relay.url_for(DATABASE_URL), REDIS_URL)
    agentrt = Cli(zygote, cfg)
    up = agentrt("db", "upgrade")
    assert up.code == 0, up.stderr
    sid = _run(agentrt, "one")
    before = _sql_version(schema, tenant, sid)
    pg_relay.cut()
    _run(agentrt, "--session", sid, "two")

    down = agentrt("store", "converge")
    assert down.code == 6, down.stderr
    assert f"still owed {tenant}/{sid}: SQL" in down.stdout, down.stdout
    assert "run this again" in down.stderr
    pg_relay.restore()

    settings = load_settings(str(cfg))
    with SessionHold(settings, build_lease(settings), tenant, sid):
        held = agentrt("store", "converge", "--json")
        assert held.code == 4, held.stderr
        (found,) = json.loads(held.stdout)["sessions"]
        assert found["session_id"] == sid and "a run holds it" in found["skipped"], found
        assert _sql_version(schema, tenant, sid) == before

    done = agentrt("store", "converge")
    assert done.code == 0, done.stderr
    assert f"replayed {tenant}/{sid}: SQL" in done.stdout, done.stdout
    assert _sql_version(schema, tenant, sid) == _version(agentrt, sid) > (before or 0)


def test_the_debtors_of_the_store_come_from_an_index(zygote: Zygote, tmp_path: Path, schema: str, tenant: str) -> None:
    """`agentrt db upgrade` makes the partial index of the sessions holding an outbox, and both
    listings of debtors (every tenant, one tenant) are answered from it, not from every stream row."""
    from checkpointing.store.pg_queries import QUERIES

    up = Cli(zygote, _config(tmp_path, "postgres", tenant, schema, DATABASE_URL, REDIS_URL))("db", "upgrade")
    assert up.code == 0, up.stderr
    engine = _engine(_url(DATABASE_URL, schema))
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SET enable_seqscan = off"))  # tiny tables: only a usable index avoids a scan
            for name, args in (("outbox_holders", {}), ("outbox_holding", {"t": tenant})):
                query = QUERIES[name].replace("{s}.", "").replace("%s", ":t")
                plan = "\n".join(str(r[0]) for r in conn.execute(sa.text(f"EXPLAIN {query}"), args))
                assert "jsonl_streams_outbox" in plan, plan
    finally:
        engine.dispose()
