"""The shipped production config on "two machines": every command in a fresh, empty base_dir.

With `persistence.store: postgres` (configs/production.yaml) a machine's base_dir is only a cache,
so the CLI flow of a session (run to the approval, show, resume --approve, the next turn, doctor)
gives the same output whether every command runs on one machine or each on a new one. Each flow
has a PostgreSQL database of its own (made by `agentrt db init`, dropped after) and a non-default
tenant; ids, times and the base_dir path are the only differences allowed.
"""

from __future__ import annotations

import difflib
import json
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from tests.cli.console import ROOT, Ran, agentrt

SERVER = "postgresql://postgres@127.0.0.1:5432"
CONFIG = str(ROOT / "configs" / "production.yaml")
TENANT = "acme-fleet"
TEXT = "Summarise the 2026 sales by region"


@pytest.fixture
def databases() -> Iterator[Callable[[], str]]:
    """`make()` gives the URL of a new database (dropped afterwards)."""
    made: list[str] = []

    def make() -> str:
        name = f"agentrt_2m_{uuid.uuid4().hex[:10]}"
        made.append(name)
        return f"{SERVER}/{name}"

    yield make
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_IDS = [
    (re.compile(r"s-[0-9a-f]{16}"), "<SESSION>"),
    (re.compile(r"r-[0-9a-f]{12}"), "<RUN>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<ENTRY>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<APPROVAL>"),
    (re.compile(r"\b\d+ ms\b"), "<MS>"),
    (re.compile(r"\b\d+ (s|min|h) ago\b"), "<AGO>"),
    (re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+(\+00:00|Z)?"), "<TIME>"),
    (re.compile(r"agentrt_2m_[0-9a-f]{10}"), "<DB>"),
]


def normalized(text: str, base_dirs: list[Path]) -> str:
    """`text` with ids, times, durations, the database and the base_dir paths replaced."""
    for base in base_dirs:
        text = text.replace(str(base), "<BASE>")
    for pattern, repl in _IDS:
        text = pattern.sub(repl, text)
    # A table's columns are as wide as their widest cell: "59 s ago" and "1 min ago" align differently.
    text = re.sub(r"(<AGO>) +", r"\1 ", re.sub(r" +(<AGO>)", r" \1", text))
    # The doctor lists run logs by run id: random ids, so their order is too.
    return re.sub(r"(files: )(\{.*\})", lambda m: m.group(1) + ", ".join(sorted(m.group(2)[1:-1].split(", "))), text)


def flow(tmp: Path, url: str, fresh_machine: bool) -> list[str]:
    """The session's CLI flow; each command in a new empty base_dir when `fresh_machine`."""
    bases: list[Path] = []

    def cli(*args: str, tenant: bool = True) -> Ran:
        base = tmp / (f"machine-{len(bases)}" if fresh_machine else "machine")
        if base not in bases:
            bases.append(base)
        if fresh_machine:
            assert not base.exists()
        env = {
            "AGENTRT_DATABASE_URL": url,
            "AGENTRT_REDIS_URL": "redis://127.0.0.1:6379/0",
            "AGENTRT_BASE_DIR": str(base),
        }
        scope = ("--tenant", TENANT) if tenant else ()
        return agentrt(*args, "--config", CONFIG, *scope, cwd=tmp, extra_env=env)

    tmp.mkdir()
    init = cli("db", "init", tenant=False)
    assert init.code == 0, init.both
    first = cli("run", "--json", TEXT)
    assert first.code == 0, first.both
    paused = json.loads(first.out)
    assert paused["status"] == "PAUSED" and paused["pending_approval"], paused
    sid = paused["session_id"]
    outs = [first.both]
    for args in (
        ("show", sid),
        ("resume", sid, "--approve"),
        ("run", "--session", sid, "--approve-all", "And the totals by channel?"),
        ("show", sid),
        ("sessions",),
        ("doctor", sid),
    ):
        done = cli(*args)
        assert done.code == 0, (args, done.both)
        outs.append(done.both)
    assert "COMPLETED" in outs[2], outs[2]
    assert "[FAIL]" not in outs[-1] and "[WARN]" not in outs[-1], outs[-1]
    return [normalized(o, bases) for o in outs]


def test_every_command_on_a_new_machine_gives_one_machines_output(tmp_path: Path, databases: Callable[[], str]) -> None:
    """Run, show, resume --approve, a second turn, sessions and doctor: each in an empty base_dir,
    the same output as all of them in one base_dir (the room's report.md is found by the resume,
    published, and the doctor finds every record and blob in PostgreSQL)."""
    one = flow(tmp_path / "one", databases(), fresh_machine=False)
    many = flow(tmp_path / "many", databases(), fresh_machine=True)
    for a, b in zip(one, many, strict=True):
        diff = "\n".join(
            difflib.unified_diff(a.splitlines(), b.splitlines(), "one machine", "new machines", lineterm="")
        )
        assert a == b, diff
    assert "publish_report" in many[2] and "report.md" in many[2]
    assert "<SESSION>" in many[5]  # the session is listed
