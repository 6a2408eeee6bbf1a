"""`--help` has an example for every command, `--version` answers, and help imports nothing heavy."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from agent.cli.commands import COMMANDS
from agent.cli.main import build_parser
from tests.cli.console import ROOT, agentrt, env


def test_every_example_parses() -> None:
    """Each command's example is valid for its own parser (so the help never shows a broken one)."""
    for cmd in COMMANDS:
        if cmd.passthrough:
            continue
        args = build_parser().parse_args(shlex.split(cmd.example)[1:])
        assert args.command == cmd.name


def test_help_and_version_through_the_console_script(tmp_path: Path) -> None:
    """`agentrt --help` lists every command with its example; `CMD --help` shows it; `--version` answers."""
    top = agentrt("--help", cwd=tmp_path)
    assert top.code == 0
    for cmd in COMMANDS:
        assert cmd.name in top.out and cmd.example in top.out
        one = agentrt(cmd.name, "--help", cwd=tmp_path)
        assert one.code == 0 and f"example:\n  {cmd.example}" in one.out, one.both
    assert "exit status:" in top.out and "7 model call failed" in top.out
    version = agentrt("--version", cwd=tmp_path)
    assert version.code == 0 and version.out.startswith("agentrt ")


def test_help_and_sessions_import_no_langgraph(tmp_path: Path) -> None:
    """Startup stays small: `--help` and `sessions` (default config) load no LangGraph, SQLAlchemy or Redis."""
    probe = (
        "import sys, json\n"
        "from agent.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('langgraph', 'sqlalchemy', 'redis', 'langchain_core') if m in sys.modules)\n"
        "print(json.dumps(heavy), file=sys.stderr)\n"
    )
    for argv in (["--help"], ["sessions"]):
        out = subprocess.run(
            [sys.executable, "-c", probe, *argv], cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120
        )
        assert json.loads(out.stderr.strip().splitlines()[-1]) == [], (argv, out.stderr)
    assert (ROOT / "bench" / "startup.py").is_file()  # the figures: python bench/startup.py


def test_sessions_on_a_sql_index_imports_no_langgraph(tmp_path: Path) -> None:
    """`sessions` in PRIMARY mode on PostgreSQL (the session table is the index) lists a session
    without loading LangGraph: listing needs no graph or saver."""
    import uuid

    import psycopg
    from psycopg import sql

    from agent.session.session import ChatSession
    from agent.session.stores.sql import SqlSessionStore

    pg = "postgresql://postgres@127.0.0.1:5432/test"
    schema = f"cli_help_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        url = f"{pg}?options=-csearch_path%3D{schema}"
        store = SqlSessionStore(url, create=True)
        store.put(ChatSession(session_id="listed-one", agent_id="a", tenant_id="t-help", user_id="second-user"))
        store.dispose()
        probe = (
            "import sys, json\n"
            "from agent.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('langgraph', 'langchain_core') if m in sys.modules)\n"
            "print(json.dumps(heavy), file=sys.stderr)\n"
        )
        extra = {"AGENTRT_DATABASE_URL": url, "AGENTRT_BASE_DIR": str(tmp_path / "volume")}
        out = subprocess.run(
            [sys.executable, "-c", probe, "sessions", "--tenant", "t-help"],
            cwd=tmp_path,
            env=env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "listed-one" in out.stdout, out.stdout + out.stderr
        assert json.loads(out.stderr.strip().splitlines()[-1]) == [], out.stderr
    finally:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
