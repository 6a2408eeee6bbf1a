"""Layers converge after outages, across processes: the durable outbox (issue 13 §4).

Real servers: PostgreSQL behind a cuttable TCP relay (in this test process), real Redis, every
turn a separate `agentrt` process (forked by a fork server that imported this checkout's
`agent.cli` once, `tests.support.zygote`) with a production.yaml-like config (PRIMARY, PostgreSQL L3 in
a schema of its own, Redis L2; the file lease, so a killed process's lease frees at once).
PostgreSQL is cut during a turn, the process is killed (SIGKILL, or the crash drill's exit at a
checkpoint), PostgreSQL comes back, and the next processes leave every page-history row of the
event log in PostgreSQL once, in order.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from agent.session.outbox import OUTBOX_FILE
from agent.session.stores import schema_version as sql_schema
from checkpointing.entry_log import EventLog
from tests.integration.test_stores_support import DATABASE_URL, REDIS_URL, Relay, pg_host_port
from tests.support.runners import ROOT, make_config
from tests.support.zygote import LAYERS, Outcome, Zygote

SCRIPT: list[dict[str, Any]] = [
    {"content": '{"plan": "add", "todos": ["add"]}'},
    {"tool_calls": [{"name": "calculator", "args": {"expression": "2 + 3"}}]},
    {"tool_calls": [{"name": "calculator", "args": {"expression": "5 * 7"}}]},
    {"content": "the answer is 35"},
]
TENANT = "default"


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """The fork server every `agentrt` command of this file's tests is forked from."""
    with Zygote(tmp_path_factory.mktemp("zygote"), LAYERS) as z:
        yield z


@pytest.fixture
def relay() -> Iterator[Relay]:
    """A cuttable TCP relay in front of the shared PostgreSQL."""
    r = Relay(*pg_host_port())
    r.restore()
    yield r
    r.cut()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A PostgreSQL schema of this test's own (dropped with everything in it afterwards)."""
    name = f"agentrt_outbox_{uuid.uuid4().hex[:10]}"
    engine = _engine(DATABASE_URL)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    yield name
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
    engine.dispose()


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def _url(base: str, schema: str) -> str:
    return f"{base}?options=-csearch_path%3D{schema}"


def _config(tmp_path: Path, relay: Relay, schema: str, mode: str = "PRIMARY") -> str:
    cfg = str(
        make_config(
            tmp_path,
            SCRIPT,
            base="production.yaml",
            model={"script": str(tmp_path / "script.yaml")},
            persistence={
                "database_url": _url(relay.url_for(DATABASE_URL), schema),
                "redis_url": REDIS_URL,
                "store": "files",  # PostgreSQL cut under the files store: the outbox catches the SQL layer up
                "lease": "file",  # a killed holder's lease is free at once (Redis would wait out its TTL)
                "mode": mode,
            },
        )
    )
    # Every turn plays the same four responses.
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": SCRIPT}))
    return cfg


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def agentrt(z: Zygote, *args: str, cwd: Path, **env: str) -> Outcome:
    """One `agentrt` process, forked from `z`, run to its end."""
    return z.run(list(args), _env(**env), timeout=240, cwd=cwd)


def _pg_rows(schema: str, sid: str) -> list[tuple[str, str, str]]:
    engine = _engine(_url(DATABASE_URL, schema))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT message_id, role, content FROM chat_messages WHERE tenant_id = :t AND session_id = :s "
                    "ORDER BY ts, message_id"
                ),
                {"t": TENANT, "s": sid},
            ).all()
    finally:
        engine.dispose()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def _pg_version(schema: str, sid: str) -> int:
    engine = _engine(_url(DATABASE_URL, schema))
    try:
        with engine.connect() as conn:
            q = sa.text("SELECT version FROM sessions WHERE tenant_id = :t AND session_id = :s")
            return int(conn.execute(q, {"t": TENANT, "s": sid}).scalar_one())
    finally:
        engine.dispose()


def _log_rows(base_dir: Path, sid: str) -> list[tuple[str, str, str]]:
    roles = {"user_turn": "user", "assistant_message": "assistant"}
    log = EventLog(base_dir, TENANT, sid)
    return [(e.id, roles[e.type], str(e.payload.get("content"))) for e in log.entries() if e.type in roles]


def _outbox(base_dir: Path, sid: str) -> Path:
    return base_dir / "tenants" / TENANT / "sessions" / sid / OUTBOX_FILE


def _first_turn(z: Zygote, tmp_path: Path, cfg: str) -> str:
    up = agentrt(z, "db", "upgrade", "--config", cfg, cwd=tmp_path)
    assert up.code == 0, up.stderr
    done = agentrt(z, "run", "--config", cfg, "--json", "one", cwd=tmp_path)
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "COMPLETED", result
    return str(result["session_id"])


def _finish(z: Zygote, tmp_path: Path, cfg: str, sid: str) -> None:
    """What a user does next: resume the killed turn if it is unfinished, then run the next turn."""
    ran = agentrt(z, "run", "--config", cfg, "--session", sid, "three", cwd=tmp_path)
    if ran.code != 0 and "unfinished run" in ran.stderr:
        resumed = agentrt(z, "resume", sid, "--config", cfg, cwd=tmp_path)
        assert resumed.code == 0, resumed.stderr
        ran = agentrt(z, "run", "--config", cfg, "--session", sid, "three", cwd=tmp_path)
    assert ran.code == 0, ran.stderr


@pytest.mark.parametrize("mode", ["PRIMARY", "MIRROR"])
def test_rows_missed_while_postgres_was_cut_reach_it_after_a_crash(
    zygote: Zygote, tmp_path: Path, relay: Relay, pg_schema: str, mode: str
) -> None:
    """Cut PostgreSQL, turn 2 dies at a checkpoint (exit 137), PostgreSQL returns: after the next
    processes every page row is in PostgreSQL once, in log order, the session row is the newest,
    and the outbox is empty."""
    cfg = _config(tmp_path, relay, pg_schema, mode)
    sid = _first_turn(zygote, tmp_path, cfg)
    base = tmp_path / "agentrt"
    assert [r[1:] for r in _pg_rows(pg_schema, sid)] == [("user", "one"), ("assistant", "the answer is 35")]

    relay.cut()
    crashed = agentrt(
        zygote, "run", "--config", cfg, "--session", sid, "two", cwd=tmp_path, AGENTRT_CRASH_AT="after_checkpoint_put:2"
    )
    assert crashed.code == 137, crashed.stderr
    assert _outbox(base, sid).stat().st_size > 0  # the missed rows are owed, on disk
    assert len(_pg_rows(pg_schema, sid)) == 2
    doctor = agentrt(zygote, "doctor", sid, "--config", cfg, "--json", cwd=tmp_path)
    found = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "session_found")
    assert found["status"] == "WARN" and "SQL messages" in found["evidence"]["outbox_owes"], found
    assert _outbox(base, sid).stat().st_size > 0  # the doctor only looked

    relay.restore()
    shown = agentrt(zygote, "show", sid, "--config", cfg, cwd=tmp_path)  # a new process that only reads the session
    assert shown.code == 0, shown.stderr
    assert _pg_rows(pg_schema, sid) == _log_rows(base, sid)  # its read replayed the outbox first
    assert [r[2] for r in _pg_rows(pg_schema, sid)] == ["one", "the answer is 35", "two"]
    assert _outbox(base, sid).stat().st_size == 0

    _finish(zygote, tmp_path, cfg, sid)
    log_rows = _log_rows(base, sid)
    assert [r[2] for r in log_rows] == [
        "one",
        "the answer is 35",
        "two",
        "the answer is 35",
        "three",
        "the answer is 35",
    ]
    assert _pg_rows(pg_schema, sid) == log_rows
    assert _outbox(base, sid).stat().st_size == 0
    assert (
        _pg_version(pg_schema, sid) == json.loads((_outbox(base, sid).parent / "session.json").read_text())["version"]
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_at_a_random_instant_while_postgres_is_cut(
    zygote: Zygote, tmp_path: Path, relay: Relay, pg_schema: str, seed: int
) -> None:
    """SIGKILL at a random instant of a turn that runs with PostgreSQL cut; the next processes
    (with PostgreSQL back) leave PostgreSQL holding exactly the event log's page rows, in order."""
    cfg = _config(tmp_path, relay, pg_schema)
    sid = _first_turn(zygote, tmp_path, cfg)
    base = tmp_path / "agentrt"
    relay.cut()
    pid = zygote.spawn(["run", "--config", cfg, "--session", sid, "two"], _env(), tmp_path)
    deadline = time.monotonic() + 120
    while not _outbox(base, sid).exists() and not zygote.ended(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(random.Random(seed).uniform(0.0, 1.5))
    zygote.kill(pid)
    zygote.wait(timeout=60, pid=pid)
    relay.restore()
    _finish(zygote, tmp_path, cfg, sid)
    log_rows = _log_rows(base, sid)
    assert [r[2] for r in log_rows][:3] == ["one", "the answer is 35", "two"]
    assert _pg_rows(pg_schema, sid) == log_rows


def test_schema_of_its_own_is_used(tmp_path: Path, relay: Relay, pg_schema: str) -> None:
    """The search_path option puts the tables (and the version table) in the test's schema only."""
    engine = _engine(_url(DATABASE_URL, pg_schema))
    try:
        sql_schema.upgrade(engine)
        assert sql_schema.current(engine) == sql_schema.HEAD
        with engine.connect() as conn:
            tables = set(
                conn.execute(
                    sa.text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                    {"s": pg_schema},
                ).scalars()
            )
    finally:
        engine.dispose()
    assert {"sessions", "chat_messages", "alembic_version"} <= tables
