"""The SQL schema is deployed by migrations: `agentrt db init` / `db upgrade`, refused when missing or old.

Each test works on its own PostgreSQL database (CREATE DATABASE with a unique name, dropped after),
through the installed console script with a production.yaml-like config (PRIMARY, Redis lease and
cache, PostgreSQL L3) pointed at it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from agent.session.stores import schema_version as schema
from agent.session.stores.sql import SqlSessionStore
from tests.integration.test_stores_support import DATABASE_URL, REDIS_URL
from tests.support.runners import ROOT, make_config

SERVER = DATABASE_URL.rsplit("/", 1)[0]


def agentrt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the console script with this checkout first on the import path."""
    exe = shutil.which("agentrt")
    assert exe is not None, "the agentrt console script is not installed (pip install -e .)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=180)


def _admin() -> sa.Engine:
    url = SERVER.replace("postgresql://", "postgresql+psycopg://") + "/postgres"
    return sa.create_engine(url, isolation_level="AUTOCOMMIT")


@pytest.fixture
def dbname() -> Iterator[str]:
    """A unique database name on the shared server; the database is dropped afterwards if it exists."""
    name = f"agentrt_schema_{uuid.uuid4().hex[:10]}"
    yield name
    engine = _admin()
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


def _create(name: str) -> None:
    engine = _admin()
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()


def _config(tmp_path: Path, dbname: str) -> str:
    return str(
        make_config(
            tmp_path,
            base="production.yaml",
            persistence={
                "database_url": f"{SERVER}/{dbname}",
                "redis_url": REDIS_URL,
                "store": "files",
                "lease": "redis",
            },
        )
    )


def _upgrade_hint(message: str, cwd: Path) -> Path | None:
    """The config the message's `agentrt db upgrade --config F` names, as run from `cwd` (a long
    message shows the path relative to the working directory, so the cut spares the command)."""
    found = re.search(r"run `agentrt db upgrade --config ([^`]+)`", message)
    return (cwd / found.group(1)).resolve() if found else None


def _sessions_dir(tmp_path: Path) -> Path:
    return tmp_path / "agentrt" / "tenants"


def test_fresh_database_is_refused_until_db_upgrade(tmp_path: Path, dbname: str) -> None:
    """An empty database: `run` says the one command to run and starts nothing; after it, `run` works."""
    _create(dbname)
    cfg = _config(tmp_path, dbname)
    refused = agentrt("run", "--config", cfg, "hello", cwd=tmp_path)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "has no agentrt schema" in lines[0] and _upgrade_hint(lines[0], tmp_path) == Path(cfg)
    assert not _sessions_dir(tmp_path).exists()  # no session was started

    up = agentrt("db", "upgrade", "--config", cfg, "--json", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    assert json.loads(up.stdout)["revision"] == schema.HEAD
    again = agentrt("db", "upgrade", "--config", cfg, cwd=tmp_path)
    assert again.returncode == 0 and "up to date" in again.stdout

    ran = agentrt("run", "--config", cfg, "--approve-all", "--json", "hello", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    sid = json.loads(ran.stdout)["session_id"]
    store = SqlSessionStore(f"{SERVER}/{dbname}")
    try:
        assert [s.session_id for s in store.list("default")] == [sid]
        assert [m.role for _, m in store.messages("default", sid)] == ["user", "assistant"]
    finally:
        store.dispose()


def test_missing_database_says_db_init_which_creates_it(tmp_path: Path, dbname: str) -> None:
    """No such database: `run` says `agentrt db init`; `db init` creates it and its tables; `run` works."""
    cfg = _config(tmp_path, dbname)
    refused = agentrt("run", "--config", cfg, "hello", cwd=tmp_path)
    assert refused.returncode == 2
    assert f"does not exist: run `agentrt db init --config {cfg}`" in refused.stderr
    made = agentrt("db", "init", "--config", cfg, "--json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    got = json.loads(made.stdout)
    assert got["created"] is True and got["revision"] == schema.HEAD and got["before"] is None
    second = agentrt("db", "init", "--config", cfg, "--json", cwd=tmp_path)
    assert json.loads(second.stdout)["created"] is False
    ran = agentrt("run", "--config", cfg, "hello", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


def test_unversioned_or_unknown_schema_is_refused(tmp_path: Path, dbname: str) -> None:
    """Tables without a version row (made before migrations) are refused, then adopted by `db upgrade`;
    a revision this agentrt does not know (a newer agentrt's) is refused and not touched."""
    _create(dbname)
    cfg = _config(tmp_path, dbname)
    assert agentrt("db", "upgrade", "--config", cfg, cwd=tmp_path).returncode == 0
    assert agentrt("run", "--config", cfg, "one", cwd=tmp_path).returncode == 0
    engine = sa.create_engine(f"{SERVER}/{dbname}".replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE alembic_version"))
        refused = agentrt("sessions", "--config", cfg, cwd=tmp_path)
        assert refused.returncode == 2 and "agentrt db upgrade" in refused.stderr
        up = agentrt("db", "upgrade", "--config", cfg, "--json", cwd=tmp_path)
        assert up.returncode == 0, up.stderr
        assert json.loads(up.stdout)["before"] is None
        listed = agentrt("sessions", "--config", cfg, "--json", cwd=tmp_path)
        assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1  # the rows were kept

        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = 'ffff9999'"))
        newer = agentrt("run", "--config", cfg, "two", cwd=tmp_path)
        assert newer.returncode == 2 and "'ffff9999', which this agentrt does not know" in newer.stderr
    finally:
        engine.dispose()


def test_downgraded_schema_is_refused(tmp_path: Path, dbname: str) -> None:
    """A schema migrated down to nothing reads as missing: refused with the upgrade command."""
    _create(dbname)
    cfg = _config(tmp_path, dbname)
    assert agentrt("db", "upgrade", "--config", cfg, cwd=tmp_path).returncode == 0
    engine = sa.create_engine(f"{SERVER}/{dbname}".replace("postgresql://", "postgresql+psycopg://"))
    try:
        schema.downgrade(engine, "base")
        assert schema.current(engine) is None
    finally:
        engine.dispose()
    refused = agentrt("run", "--config", cfg, "hello", cwd=tmp_path)
    assert refused.returncode == 2 and _upgrade_hint(refused.stderr, tmp_path) == Path(cfg), refused.stderr


def test_embedded_sqlite_creates_its_schema_on_first_use(tmp_path: Path) -> None:
    """The default config needs no set-up step: the first run creates agentrt.db at the newest revision."""
    cfg = str(make_config(tmp_path))
    ran = agentrt("run", "--config", cfg, "hello", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'agentrt' / 'agentrt.db'}")
    try:
        assert schema.current(engine) == schema.HEAD
    finally:
        engine.dispose()


def test_head_constant_matches_the_migration_scripts() -> None:
    """schema.HEAD (what a running process compares with) is the scripts' head revision."""
    assert schema.script_head() == schema.HEAD == schema.REVISIONS[-1]


OLD_APPEND = (
    "WITH a AS (INSERT INTO jsonl_streams AS st (tenant, thread, run, end_pos, lines) VALUES (%s, %s, %s, %s, 1)"
    " ON CONFLICT (tenant, thread, run) DO UPDATE SET end_pos = st.end_pos + EXCLUDED.end_pos, lines = st.lines + 1"
    " RETURNING st.id, st.end_pos - %s AS start)"
    " INSERT INTO jsonl_records (stream, pos, line) SELECT a.id, a.start, %s FROM a"
)
"""How the release at revision 0004 appended a line: the stream row kept its end and line count."""


def test_db_upgrade_moves_a_record_store_of_revision_0004_and_keeps_its_rows(tmp_path: Path, dbname: str) -> None:
    """A database at 0004 whose record store holds streams written by that release: `db upgrade`
    moves it to the head; every stream reads back byte for byte and appends go on at its end."""
    from checkpointing.records import frame
    from checkpointing.store.pg_schema import MIGRATIONS, MIGRATIONS_TABLE
    from checkpointing.store.postgres import PostgresStore

    _create(dbname)
    url = f"{SERVER}/{dbname}"
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        schema.upgrade(engine, target="0003")
        lines = [frame(json.dumps({"n": n, "pad": "x" * n}).encode()) for n in range(5)]
        with engine.begin() as conn:  # the store's tables as the release at 0004 made them
            raw = conn.connection.driver_connection
            raw.execute(MIGRATIONS_TABLE.format(schema='"public"'))
            for v, statement in enumerate(MIGRATIONS[:3]):
                raw.execute(statement.format(schema='"public"'))
                raw.execute("INSERT INTO jsonl_store_migrations (v) VALUES (%s)", (v,))
            for line in lines:
                raw.execute(OLD_APPEND, ("default", "t1", "run-1", len(line), len(line), line))
            raw.execute(OLD_APPEND, ("default", "t1", "@events", len(lines[0]), len(lines[0]), lines[0]))
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '0004'"))
    finally:
        engine.dispose()
    cfg = str(
        make_config(
            tmp_path,
            base="production.yaml",
            persistence={"database_url": url, "redis_url": REDIS_URL, "store": "postgres", "lease": "redis"},
        )
    )
    up = agentrt("db", "upgrade", "--config", cfg, "--json", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    assert json.loads(up.stdout)["revision"] == schema.HEAD

    store = PostgresStore(url, max_connections=1)
    try:
        assert store.migrations_run() == set(range(len(MIGRATIONS)))
        streams = store.session("default", "t1", "always")
        assert streams.dump()[0] == {"run-1": b"".join(lines), "@events": lines[0]}
        end = sum(len(line) for line in lines)
        assert streams.head("run-1")[0] == end
        assert [off for off, _ in streams.scan("run-1").records] == [sum(len(x) for x in lines[:n]) for n in range(5)]
        more = frame(b'{"n":5}')
        offsets, _, _ = streams.append("run-1", [more, more], None, 1)
        assert offsets == [end, end + len(more)]
        assert streams.dump()[0]["run-1"] == b"".join(lines) + more + more
    finally:
        store.close()
