"""Debts of dead processes are paid without the session's next turn (agentrt/session/sweep.py).

Real servers: PostgreSQL and Redis, each reached through a cuttable TCP relay in this test
process, so cutting a relay is an outage of that layer only (the shared servers keep running);
every step is its own `agentrt` process (`python -m agent.cli`, this checkout). A CLI run while
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


def agentrt(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One `agentrt` process (python -m agent.cli, this checkout first on the path)."""
    cmd = [sys.executable, "-m", "agent.cli", *args, "--config", str(cfg)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cfg.parent, env=_env(), timeout=240)


def _run(cfg: Path, *args: str) -> str:
    done = agentrt(cfg, "run", "--json", *args)
    assert done.returncode == 0, done.stderr
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


def _version(cfg: Path, sid: str) -> int:
    """The session's version as agentrt reports it (read once nothing is owed: no replay left)."""
    shown = agentrt(cfg, "show", sid, "--json")
    assert shown.returncode == 0, shown.stderr
    return int(json.loads(shown.stdout)["session"]["version"])


def _outbox_check(cfg: Path) -> dict[str, Any]:
    done = agentrt(cfg, "doctor", "--json")
    return next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "outbox")


def _wait(what: str, ok: Callable[[], bool], log: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.25)
    raise AssertionError(f"{what} did not happen within {BOUND_S}s\n{log()}")


def _sql_outage(tmp_path: Path, store: str, tenant: str, schema: str, relay: Relay) -> tuple[Path, str, str, int]:
    """Session A made with PostgreSQL up; then, with it cut, a turn of A and a new session B, each
    a CLI run that exits. Returns (config, A, B, A's SQL version before the outage)."""
    cfg = _config(tmp_path, store, tenant, schema, relay.url_for(DATABASE_URL), REDIS_URL)
    up = agentrt(cfg, "db", "upgrade")
    assert up.returncode == 0, up.stderr
    a = _run(cfg, "one")
    before = _sql_version(schema, tenant, a)
    assert before is not None

    relay.cut()
    assert _run(cfg, "--session", a, "two") == a
    b = _run(cfg, "fresh")
    assert _sql_version(schema, tenant, a) == before  # the exited run left SQL behind ...
    assert _sql_version(schema, tenant, b) is None  # ... and no row at all for B
    check = _outbox_check(cfg)
    assert check["status"] == "WARN" and {a, b} <= set(check["evidence"]["sessions"]), check
    relay.restore()
    return cfg, a, b, before


def _converged(cfg: Path, schema: str, tenant: str, a: str, b: str, before: int) -> None:
    """SQL holds both sessions at their newest version; the doctor says nothing is owed."""
    check = _outbox_check(cfg)
    assert check["status"] == "OK", check
    for sid in (a, b):
        assert _sql_version(schema, tenant, sid) == _version(cfg, sid)
    assert _version(cfg, a) > before


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_serve_replays_what_sql_missed_while_a_cli_run_exited(
    tmp_path: Path, pg_relay: Relay, schema: str, tenant: str, store: str
) -> None:
    """PostgreSQL cut during CLI runs that exit; back; a running `agentrt serve` (no request) pays."""
    cfg, a, b, before = _sql_outage(tmp_path, store, tenant, schema, pg_relay)
    with serving(cfg, tmp_path) as server:
        _wait(
            "serve replaying the SQL debts",
            lambda: _sql_version(schema, tenant, b) is not None and _sql_version(schema, tenant, a) != before,
            lambda: server.log.read_text()[-3000:],
        )
    _converged(cfg, schema, tenant, a, b, before)


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_an_idle_worker_replays_what_sql_missed(
    tmp_path: Path, pg_relay: Relay, schema: str, tenant: str, store: str
) -> None:
    """The same outage; a Celery worker with no task to run pays the debts."""
    cfg, a, b, before = _sql_outage(tmp_path, store, tenant, schema, pg_relay)
    queue = yaml.safe_load(cfg.read_text())["workers"]["queue"]
    log = tmp_path / "worker.log"
    cmd = [sys.executable, "-m", "celery", "-A", "agent.worker", "worker", "-Q", queue, "--concurrency", "1"]
    cmd += ["--hostname", f"{queue}@%h", "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**_env(), "AGENTRT_CONFIG": str(cfg)},
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
    _converged(cfg, schema, tenant, a, b, before)


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_store_converge_replays_what_redis_missed(
    tmp_path: Path, redis_relay: Relay, schema: str, tenant: str, store: str
) -> None:
    """Redis cut during a CLI run that exits leaves the older copy cached; `agentrt store converge
    --tenant T` removes it, says what it replayed, and a second run finds nothing owed."""
    extra = {"lease": "postgres"} if store == "postgres" else {}
    cfg = _config(tmp_path, store, tenant, schema, DATABASE_URL, redis_relay.url_for(REDIS_URL), **extra)
    up = agentrt(cfg, "db", "upgrade")
    assert up.returncode == 0, up.stderr
    sid = _run(cfg, "one")
    client = redis.Redis.from_url(REDIS_URL)
    key = f"agentrt:{tenant}:session:{sid}"
    try:
        _run(cfg, "--session", sid, "again")  # a read fills Redis with the copy of turn one's end
        cached = client.get(key)
        assert cached is not None

        redis_relay.cut()
        _run(cfg, "--session", sid, "two")
        stale = json.loads(client.get(key) or b"{}")
        assert stale, "the cached copy went away during the outage"
        redis_relay.restore()

        other = agentrt(cfg, "store", "converge", "--tenant", "someone-else")
        assert other.returncode == 0, other.stderr
        assert "no session owes" in other.stdout
        assert client.get(key) is not None  # another tenant's converge left it

        done = agentrt(cfg, "store", "converge", "--tenant", tenant)
        assert done.returncode == 0, done.stderr
        assert f"replayed {tenant}/{sid}: L2" in done.stdout, done.stdout
        now = client.get(key)
        assert now is None or json.loads(now)["version"] > stale["version"]
        assert _version(cfg, sid) > stale["version"]
        again = agentrt(cfg, "store", "converge", "--json")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["sessions"] == []
        assert _outbox_check(cfg)["status"] == "OK"
    finally:
        client.close()


def test_store_converge_leaves_a_held_session_and_a_layer_still_down(
    tmp_path: Path, pg_relay: Relay, schema: str, tenant: str
) -> None:
    """While PostgreSQL is still cut, `store converge` replays nothing and exits 6; while a run holds
    the session, it skips it (exit 4, SQL untouched); once free, it replays it (exit 0)."""
    cfg = _config(tmp_path, "files", tenant, schema, pg_relay.url_for(DATABASE_URL), REDIS_URL)
    up = agentrt(cfg, "db", "upgrade")
    assert up.returncode == 0, up.stderr
    sid = _run(cfg, "one")
    before = _sql_version(schema, tenant, sid)
    pg_relay.cut()
    _run(cfg, "--session", sid, "two")

    down = agentrt(cfg, "store", "converge")
    assert down.returncode == 6, down.stderr
    assert f"still owed {tenant}/{sid}: SQL" in down.stdout, down.stdout
    assert "run this again" in down.stderr
    pg_relay.restore()

    settings = load_settings(str(cfg))
    with SessionHold(settings, build_lease(settings), tenant, sid):
        held = agentrt(cfg, "store", "converge", "--json")
        assert held.returncode == 4, held.stderr
        (found,) = json.loads(held.stdout)["sessions"]
        assert found["session_id"] == sid and "a run holds it" in found["skipped"], found
        assert _sql_version(schema, tenant, sid) == before

    done = agentrt(cfg, "store", "converge")
    assert done.returncode == 0, done.stderr
    assert f"replayed {tenant}/{sid}: SQL" in done.stdout, done.stdout
    assert _sql_version(schema, tenant, sid) == _version(cfg, sid) > (before or 0)


def test_the_debtors_of_the_store_come_from_an_index(tmp_path: Path, schema: str, tenant: str) -> None:
    """`agentrt db upgrade` makes the partial index of the sessions holding an outbox, and both
    listings of debtors (every tenant, one tenant) are answered from it, not from every stream row."""
    from checkpointing.store.pg_queries import QUERIES

    cfg = _config(tmp_path, "postgres", tenant, schema, DATABASE_URL, REDIS_URL)
    up = agentrt(cfg, "db", "upgrade")
    assert up.returncode == 0, up.stderr
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
