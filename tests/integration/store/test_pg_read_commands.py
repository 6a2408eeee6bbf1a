"""The read commands on a PostgreSQL deployment load no LangGraph, LangChain or SQLAlchemy.

`show`, `tool-result` and `doctor` on `persistence.store: postgres` (PRIMARY, the session table and
the lease in the same database) read the session from the record store with psycopg, as on the
embedded default they read the files: each command runs as a user runs it (a fresh process calling
`agent.cli.main`) and prints the very bytes, with the same exit status, as the same command answered
by an AgentRunner in that process. A session table at an older schema revision is refused in the
runner's words.
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
    "import agent.run.reader as r; r.SessionReader.open = classmethod(lambda cls, config: None)\n"
    "import agent.doctor.light as d; d.LightContext.open = classmethod(lambda cls, config: None)"
)


def _cli(work: Path, args: list[str], *, runner: bool = False) -> tuple[int, str, str, list[str]]:
    """(exit status, stdout, stderr without the marker line, forbidden modules loaded)."""
    code = _CLI.format(prelude=_RUNNER_ONLY if runner else "")
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
