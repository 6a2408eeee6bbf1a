"""After a PostgreSQL outage every layer converges without waiting for the session's next turn.

Real servers: PostgreSQL behind a cuttable TCP relay (this test process), real Redis, every
command a separate `agentrt` process (forked by a fork server that imported this checkout's
`agent.cli` once, `tests.support.zygote`) on a production.yaml config (PRIMARY, PostgreSQL L3 in a
schema of its own, Redis L2, the file lease), a non-default tenant and a fresh session id. The
run holds inside its `bump` tool at a gate the test opens, so PostgreSQL can come back mid-run.
What is asserted is what a user sees: `agentrt show --json`'s version, the PostgreSQL row read
with psycopg, and `agentrt doctor`'s findings.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.integration.test_stores_support import DATABASE_URL, REDIS_URL, Relay, pg_host_port
from tests.support.runners import ROOT, make_config
from tests.support.zygote import LAYERS, Outcome, Zygote

TENANT = "acme-outbox"
SCRIPT: list[dict[str, Any]] = [
    {"content": '{"plan": "bump once", "todos": ["bump"]}'},
    {"tool_calls": [{"name": "bump", "args": {"label": "one"}}]},
    {"content": "bumped"},
]
TOOLS = {
    "builtins": ["calculator", "update_todo"],
    "custom": [{"path": "tests.support.drill_tools:bump", "effect": "unsafe"}],
}


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """The fork server every `agentrt` command of this file's tests is forked from."""
    with Zygote(tmp_path_factory.mktemp("zygote"), LAYERS) as z:
        yield z


@pytest.fixture
def relay() -> Iterator[Relay]:
    """A cuttable TCP relay in front of the shared PostgreSQL (up at the start)."""
    r = Relay(*pg_host_port())
    r.restore()
    yield r
    r.cut()


@pytest.fixture
def schema() -> Iterator[str]:
    """A PostgreSQL schema of this test's own, dropped afterwards."""
    name = f"agentrt_replay_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    yield name
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')


class Cli:
    """`agentrt` commands in child processes on one config, forked from `zygote`."""

    def __init__(self, zygote: Zygote, tmp_path: Path, relay: Relay, schema: str) -> None:
        self.zygote = zygote
        self.cwd = tmp_path
        self.base = tmp_path / "agentrt"
        self.gate = tmp_path / "gate"
        self.counter = tmp_path / "counter"
        url = f"{relay.url_for(DATABASE_URL)}?options=-csearch_path%3D{schema}"
        config = make_config(
            tmp_path,
            SCRIPT,
            base="production.yaml",
            tools=TOOLS,
            persistence={
                "database_url": url,
                "redis_url": REDIS_URL,
                "store": "files",  # PostgreSQL cut under the files store: the outbox catches the SQL layer up
                "lease": "file",
                "mode": "PRIMARY",
            },
        )
        data = yaml.safe_load(config.read_text())
        data.update(datasets=[], skills_dir=None)  # the demo skill allows tools this config has not
        config.write_text(yaml.safe_dump(data, sort_keys=False))
        self.config = str(config)
        # Every turn plays the same responses.
        (tmp_path / "script.yaml").write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": SCRIPT}))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
        return {
            **env,
            "PYTHONPATH": str(ROOT),
            "AGENTRT_DRILL_COUNTER": str(self.counter),
            "AGENTRT_DRILL_GATE": str(self.gate),
        }

    def argv(self, *args: str, tenant: bool = True) -> list[str]:
        return [*args, "--config", self.config, *(["--tenant", TENANT] if tenant else [])]

    def __call__(self, *args: str, tenant: bool = True) -> Outcome:
        return self.zygote.run(self.argv(*args, tenant=tenant), self.env(), timeout=240, cwd=self.cwd)

    def start(self, *args: str) -> int:
        """Start a command without waiting; its pid (`finish` or `kill` it before the next one)."""
        return self.zygote.spawn(self.argv(*args), self.env(), self.cwd)

    def finish(self, pid: int, timeout: float) -> Outcome:
        """Wait for the started command to end."""
        return self.zygote.wait(timeout, pid)

    def kill(self, pid: int) -> None:
        """SIGKILL the started command and wait for it."""
        self.zygote.kill(pid)
        self.zygote.wait(60, pid)

    def shown_version(self, sid: str) -> int:
        shown = self("show", sid, "--json")
        assert shown.code == 0, shown.stderr
        return int(json.loads(shown.stdout)["session"]["version"])

    def file_version(self, sid: str) -> int:
        """The version in session.json (read in place: a command would replay the outbox first)."""
        doc = self.base / "tenants" / TENANT / "sessions" / sid / "session.json"
        return int(json.loads(doc.read_text())["version"]) if doc.exists() else 0

    def doctor(self, sid: str) -> dict[str, Any]:
        done = self("doctor", sid, "--json")
        assert done.code == 0, done.stdout + done.stderr
        return next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "session_found")

    def store_doctor(self) -> dict[str, Any]:
        done = self("doctor", "--json")
        assert done.code == 0, done.stdout + done.stderr
        return next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "outbox")

    def open_gate(self) -> None:
        self.gate.touch()

    def close_gate(self) -> None:
        self.gate.unlink()
        Path(str(self.gate) + ".waiting").unlink()

    def wait_at_gate(self, pid: int) -> None:
        _until(lambda: Path(str(self.gate) + ".waiting").exists() or self.zygote.ended(pid), 120)
        if self.zygote.ended(pid):
            done = self.finish(pid, 60)
            raise AssertionError(f"the run ended ({done.code}) before the gate: {done.stderr[-3000:]}")


def _until(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _row(schema: str, sid: str) -> tuple[int, int] | None:
    """(session row version, chat_messages rows) in PostgreSQL, read directly; None: no row."""
    with psycopg.connect(DATABASE_URL, options=f"-csearch_path={schema}") as conn:
        got = conn.execute(
            "SELECT version FROM sessions WHERE tenant_id = %s AND session_id = %s", (TENANT, sid)
        ).fetchone()
        rows = conn.execute(
            "SELECT count(*) FROM chat_messages WHERE tenant_id = %s AND session_id = %s", (TENANT, sid)
        ).fetchone()
    return None if got is None else (int(got[0]), int(rows[0]) if rows else 0)


def _upgrade(cli: Cli) -> None:
    up = cli("db", "upgrade", tenant=False)
    assert up.code == 0, up.stderr


def _first_turn(cli: Cli, sid: str) -> None:
    cli.open_gate()
    done = cli("run", "--new-session", sid, "--json", "first")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "COMPLETED"
    cli.close_gate()


@pytest.mark.parametrize("hold_s", [0.0, 8.0], ids=["restored-just-before-the-end", "restored-mid-run"])
def test_postgres_back_before_the_run_ends_gets_the_newest_row(
    zygote: Zygote, tmp_path: Path, relay: Relay, schema: str, hold_s: float
) -> None:
    """PostgreSQL is cut while a turn starts (its first saves and page row miss it) and comes
    back while the turn is still inside its tool: when the run is over, the PostgreSQL row has
    session.json's version and every page row. Held in the tool past the retry interval, the
    row is already there before the run ends (the background retry)."""
    cli = Cli(zygote, tmp_path, relay, schema)
    sid = f"cut-{uuid.uuid4().hex[:8]}"
    _upgrade(cli)
    _first_turn(cli, sid)
    assert _row(schema, sid) == (cli.file_version(sid), 2)

    relay.cut()
    pid = cli.start("run", "--session", sid, "--json", "second")
    cli.wait_at_gate(pid)  # the turn's start is saved: PostgreSQL missed it
    row = _row(schema, sid)
    assert row is not None and row[0] < cli.file_version(sid)
    relay.restore()
    if hold_s:
        assert _until(lambda: (_row(schema, sid) or (0, 0))[0] == cli.file_version(sid), hold_s + 20), (
            "the background retry did not bring the row while the run was still going"
        )
    cli.open_gate()
    done = cli.finish(pid, 120)
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "COMPLETED"

    version = cli.file_version(sid)
    assert _row(schema, sid) == (version, 4)  # before any other command touched the session
    assert not cli.doctor(sid).get("evidence", {}).get("behind")
    assert cli.shown_version(sid) == version


def test_a_run_with_postgres_down_is_listed_by_the_doctor_and_replayed_when_it_answers(
    zygote: Zygote, tmp_path: Path, relay: Relay, schema: str
) -> None:
    """A whole new session runs with PostgreSQL down (the CLI stays in PRIMARY): no row; the
    doctor says SQL is behind, by how many changes, for the session and store-wide; once
    PostgreSQL answers, the next command reading the session writes the row and the doctor is OK."""
    cli = Cli(zygote, tmp_path, relay, schema)
    sid = f"down-{uuid.uuid4().hex[:8]}"
    _upgrade(cli)
    relay.cut()
    cli.open_gate()
    done = cli("run", "--new-session", sid, "--json", "while down")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "COMPLETED"
    relay.restore()
    assert _row(schema, sid) is None
    relay.cut()

    found = cli.doctor(sid)
    assert found["status"] == "WARN", found
    behind = found["evidence"]["behind"]["SQL"]
    assert behind["changes"] >= 3 and behind["since"], behind
    assert f"SQL is behind: {behind['changes']} unpaid changes since {behind['since']}" in found["evidence"]["summary"]
    assert "they replay when PostgreSQL answers" in found["evidence"]["summary"]
    assert f"agentrt doctor {sid} --repair" in found["evidence"]["summary"]
    store = cli.store_doctor()
    assert store["status"] == "WARN" and sid in store["evidence"]["sessions"], store
    assert store["evidence"]["sessions"][sid]["SQL"]["changes"] == behind["changes"]

    relay.restore()
    version = cli.shown_version(sid)  # a read replays what PostgreSQL missed first
    assert _row(schema, sid) == (version, 2)
    found = cli.doctor(sid)
    assert found["status"] == "OK", found
    assert cli.store_doctor()["status"] == "OK"


def test_debts_survive_a_kill_and_the_doctor_repairs_them(
    zygote: Zygote, tmp_path: Path, relay: Relay, schema: str
) -> None:
    """SIGKILL a run while PostgreSQL is down: its debts are on disk; the doctor says how far
    behind PostgreSQL is; once it answers, `agentrt doctor ID --repair` replays them."""
    cli = Cli(zygote, tmp_path, relay, schema)
    sid = f"kill-{uuid.uuid4().hex[:8]}"
    _upgrade(cli)
    _first_turn(cli, sid)
    relay.cut()
    pid = cli.start("run", "--session", sid, "--json", "then killed")
    cli.wait_at_gate(pid)
    cli.kill(pid)
    relay.restore()
    row = _row(schema, sid)
    assert row is not None and row[0] < cli.file_version(sid)

    found = cli.doctor(sid)  # PostgreSQL answers, but the doctor only looks
    assert found["status"] == "WARN" and found["evidence"]["behind"]["SQL"]["changes"] >= 2, found
    assert "SQL is behind" in found["evidence"]["summary"]
    assert _row(schema, sid) == row

    repaired = cli("doctor", sid, "--repair", "--json")
    assert repaired.code == 0, repaired.stdout + repaired.stderr
    assert "replayed what SQL" in repaired.stderr, repaired.stderr
    assert _row(schema, sid) == (cli.file_version(sid), 3)
    assert not cli.doctor(sid)["evidence"].get("behind")

    assert cli.shown_version(sid) == _row(schema, sid)[0]  # type: ignore[index]
