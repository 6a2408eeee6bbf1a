"""The read commands on a PostgreSQL deployment load no LangGraph, LangChain or SQLAlchemy.

`show`, `tool-result` and `doctor` on `persistence.store: postgres` (PRIMARY, the session table and
the lease in the same database) read the session from the record store with psycopg, as on the
embedded default they read the files: each command runs as a user runs it (a fresh process calling
`agent.cli.main`) and prints the very bytes, with the same exit status, as the same command answered
by an AgentRunner in that process. A session table at an older schema revision is refused in the
runner's words. `sessions` lists the session table with psycopg and prints what the SQLAlchemy
listing prints, for every filter and page of the command, each tenant and user seeing only their own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import yaml

from tests.cli.console import agentrt, env
from tests.integration.test_stores_support import DATABASE_URL
from tests.support.runners import ROOT

SERVER = DATABASE_URL.rsplit("/", 1)[0]
FORBIDDEN = ("langgraph", "langchain_core", "sqlalchemy")
_MARK = "@@loaded@@"
_CLI = f"""
import sys
{{prelude}}
from agent.cli.main import main
try:
    code = main(sys.argv[1:])
finally:
    sys.stdout.flush()
    print("{_MARK}" + ",".join(m for m in {FORBIDDEN!r} if m in sys.modules), file=sys.stderr)
sys.exit(code)
"""
_RUNNER_ONLY = (
    "import agent.runner.reader as r; r.SessionReader.open = classmethod(lambda cls, config: None)\n"
    "import agent.doctor.light as d; d.LightContext.open = classmethod(lambda cls, config: None)"
)

_SQLALCHEMY = (
    "import agent.session.stores.sql_lazy_pg as p; p.LazyPgSessionStore.server = staticmethod(lambda url: False)"
)


def _cli(
    work: Path, args: list[str], *, runner: bool = False, sqlalchemy: bool = False
) -> tuple[int, str, str, list[str]]:
    """(exit status, stdout, stderr without the marker line, forbidden modules loaded)."""
    code = _CLI.format(prelude=_SQLALCHEMY if sqlalchemy else _RUNNER_ONLY if runner else "")
    p = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=work, env=env(), capture_output=True, text=True, timeout=300
    )
    err, _, loaded = p.stderr.rpartition(_MARK)
    calm = [re.sub(r"\d+ (s|min|h|d) ago\s*", "N ago ", text) for text in (p.stdout, err)]
    return p.returncode, calm[0], calm[1], [m for m in loaded.strip().split(",") if m]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """(folder, config, a session paused for an approval) on a database of its own, dropped after."""
    work = tmp_path_factory.mktemp("pg-reads")
    name = f"agentrt_reads_{uuid.uuid4().hex[:10]}"
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data["persistence"].update(
        base_dir=str(work / "base"), store="postgres", database_url=f"{SERVER}/{name}", lease="postgres"
    )
    config = work / "agentrt.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        made = agentrt("db", "init", "--config", str(config), cwd=work)
        assert made.code == 0, made.both
        ran = agentrt("run", "--json", "--config", str(config), "hi", cwd=work)
        assert ran.code == 0, ran.both
        yield work, config, json.loads(ran.out)["session_id"]
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _commands(sid: str) -> list[list[str]]:
    return [
        ["show", sid],
        ["show", sid, "--json"],
        ["show", sid, "--user", "someone-else"],
        ["show", "s-0123456789abcdef"],
        ["tool-result", sid, "call_3_1", "--offset", "100", "--limit", "80"],
        ["tool-result", sid, "call_nope"],
        ["doctor", sid],
        ["doctor", sid, "--json"],
    ]


@pytest.mark.parametrize("index", range(8))
def test_a_read_command_on_postgres_loads_no_graph_and_prints_what_a_runner_does(
    deployment: tuple[Path, Path, str], index: int
) -> None:
    """No LangGraph, LangChain or SQLAlchemy in the process; the runner's bytes and exit status."""
    work, config, sid = deployment
    args = [*_commands(sid)[index], "--config", str(config)]
    if args[0] == "doctor":
        assert agentrt("doctor", sid, "--config", str(config), cwd=work).code == 0  # the pins kept once
    code, out, err, loaded = _cli(work, args)
    assert loaded == [], f"agentrt {' '.join(args)} loaded {loaded}"
    assert (code, out, err) == _cli(work, args, runner=True)[:3], f"agentrt {' '.join(args)} changed its output"


def test_an_older_session_table_is_refused_in_the_runners_words(deployment: tuple[Path, Path, str]) -> None:
    """A session table at revision 0005: `agentrt db upgrade` named, as a runner names it."""
    work, config, sid = deployment
    url = yaml.safe_load(config.read_text())["persistence"]["database_url"]
    with psycopg.connect(url, autocommit=True) as conn:
        head = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        assert head is not None
        conn.execute("UPDATE alembic_version SET version_num = '0005'")
        try:
            args = ["show", sid, "--config", str(config)]
            code, out, err, _ = _cli(work, args)
            assert code != 0 and "agentrt db upgrade" in err, err
            assert (code, out, err) == _cli(work, args, runner=True)[:3]
        finally:
            conn.execute("UPDATE alembic_version SET version_num = %s", (head[0],))


OTHER_TENANT, OTHER_USER = "tenant-two", "user-two"


@pytest.fixture(scope="module")
def listed(deployment: tuple[Path, Path, str]) -> dict[tuple[str, str], list[str]]:
    """Sessions written through the session manager: (tenant, user) -> their ids; one of them expired,
    two with thread metadata."""
    from agent.core.config import load_settings
    from agent.runner.services import build_manager
    from agent.session.session import THREAD_METADATA

    _, config, sid = deployment
    manager = build_manager(load_settings(str(config)))
    made: dict[tuple[str, str], list[str]] = {("default", "local"): [sid]}
    for n, (tenant, user) in enumerate([("default", "local")] * 3 + [("default", OTHER_USER), (OTHER_TENANT, "local")]):
        session = manager.create(tenant, "default", user)
        if n < 2:
            session.context[THREAD_METADATA] = {"team": "blue"}
        if n == 2:
            session.expire_minutes = 1
            session.last_active_time = session.last_active_time.replace(year=2020)
        manager.save(session)
        made.setdefault((tenant, user), []).append(session.session_id)
    return made


_LISTINGS = [
    ["sessions"],
    ["sessions", "--json"],
    ["sessions", "--limit", "2"],
    ["sessions", "--limit", "0", "--json"],
    ["sessions", "--user", OTHER_USER],
    ["sessions", "--tenant", OTHER_TENANT, "--json"],
    ["sessions", "--status", "ACTIVE"],
    ["sessions", "--status", "EXPIRED", "--json"],
    ["sessions", "--status", "FAILED"],
    ["sessions", "--meta", "team=blue", "--json"],
    ["sessions", "--after", "not-a-cursor"],
]


@pytest.mark.parametrize("index", range(len(_LISTINGS)))
def test_sessions_on_postgres_lists_with_psycopg_what_sqlalchemy_lists(
    deployment: tuple[Path, Path, str], listed: dict[tuple[str, str], list[str]], index: int
) -> None:
    """No LangGraph, LangChain or SQLAlchemy loaded; the SQLAlchemy listing's bytes and exit status."""
    work, config, _ = deployment
    args = [*_LISTINGS[index], "--config", str(config)]
    code, out, err, loaded = _cli(work, args)
    assert loaded == [], f"agentrt {' '.join(args)} loaded {loaded}"
    old = _cli(work, args, sqlalchemy=True)
    assert "sqlalchemy" in old[3] or code != 0, "the comparison did not take the SQLAlchemy path"
    assert (code, out, err) == old[:3], f"agentrt {' '.join(args)} changed its output"
    if "--json" in args and code == 0:
        ids = {row["session_id"] for row in json.loads(out)}
        tenant = OTHER_TENANT if OTHER_TENANT in args else "default"
        assert ids and ids <= {s for (t, _), got in listed.items() if t == tenant for s in got}


def test_each_tenant_and_user_sees_only_their_own_sessions(
    deployment: tuple[Path, Path, str], listed: dict[tuple[str, str], list[str]]
) -> None:
    """A second tenant and a second user list exactly their rows."""
    work, config, _ = deployment
    for who, (tenant, user) in (
        (["--tenant", OTHER_TENANT], (OTHER_TENANT, "local")),
        (["--user", OTHER_USER], ("default", OTHER_USER)),
    ):
        code, out, err, loaded = _cli(work, ["sessions", "--json", *who, "--config", str(config)])
        assert (code, loaded) == (0, []), err
        assert [row["session_id"] for row in json.loads(out)] == listed[(tenant, user)]


def test_paging_with_after_continues_where_the_page_ended(
    deployment: tuple[Path, Path, str], listed: dict[tuple[str, str], list[str]]
) -> None:
    """Pages of 2 by cursor cover the tenant's sessions once each, as the SQLAlchemy listing pages them."""
    work, config, _ = deployment
    seen: list[str] = []
    after: list[str] = []
    while True:
        args = ["sessions", "--json", "--limit", "2", *after, "--config", str(config)]
        code, out, err, loaded = _cli(work, args)
        assert (code, loaded) == (0, []), err
        assert (code, out, err) == _cli(work, args, sqlalchemy=True)[:3]
        rows = json.loads(out)
        seen += [row["session_id"] for row in rows]
        if len(rows) < 2:
            break
        after = ["--after", rows[-1]["cursor"]]
    text = _cli(work, ["sessions", "--limit", "2", "--config", str(config)])[1]
    assert "more: agentrt sessions --after " in text
    mine = [s for (t, _), got in listed.items() if t == "default" for s in got]
    assert sorted(seen) == sorted(mine) and len(seen) == len(set(seen))
