"""The read commands on the embedded default load no LangGraph, LangChain, SQLAlchemy or psycopg.

Each command runs as a user runs it (a fresh process calling `agent.cli.main`, the shipped default
config, in a fresh folder) on sessions made by `agentrt run`: a forked session, a paused session of
a second tenant, an unknown id and an empty id; `agentrt doctor` also on a damaged session (torn
tails, a corrupt journal record, a lost blob). At exit the process lists which of the four
packages are in `sys.modules`: none may be. The same command run the way every read command ran
before (an AgentRunner answers: the reader and the doctor's light context are turned off in that
process only) prints the very same bytes and exits with the same status; the two run side by side,
each in a copy of the folder made just before. A session whose
checkpoint records are damaged is diagnosed with LangGraph (`agent.doctor.light`), in the same words.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.cli.console import agentrt, env

FORBIDDEN = ("langgraph", "langchain_core", "sqlalchemy", "psycopg")
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


def _cli(work: Path, args: list[str], *, runner: bool = False) -> tuple[int, str, str, list[str]]:
    """(exit status, stdout, stderr without the marker line, forbidden modules loaded)."""
    code = _CLI.format(prelude=_RUNNER_ONLY if runner else "")
    p = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=work, env=env(), capture_output=True, text=True, timeout=300
    )
    err, _, loaded = p.stderr.rpartition(_MARK)
    return p.returncode, _calm(p.stdout), _calm(err), [m for m in loaded.strip().split(",") if m]


def _both(work: Path, args: list[str]) -> tuple[tuple[int, str, str, list[str]], tuple[int, str, str, list[str]]]:
    """`_cli` as a user runs it and as a runner answers it, at the same time, each in a copy of
    `work` made now (so neither sees what the other writes, as when they ran one after the other)."""
    copies = []
    for name in ("reader", "runner"):
        copy = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work.parent))
        shutil.copytree(work, copy, dirs_exist_ok=True)
        copies.append(copy)
    with ThreadPoolExecutor(max_workers=2) as pool:
        reader = pool.submit(_cli, copies[0], args)
        runner = pool.submit(_cli, copies[1], args, runner=True)
        return _at(reader.result(), copies[0], work), _at(runner.result(), copies[1], work)


def _at(ran: tuple[int, str, str, list[str]], copy: Path, work: Path) -> tuple[int, str, str, list[str]]:
    """`ran` as printed in `work`: the paths the doctor prints name the copy's folder."""
    code, out, err, loaded = ran
    return code, out.replace(str(copy), str(work)), err.replace(str(copy), str(work)), loaded


def _calm(text: str) -> str:
    """`text` with relative times ("3 s ago") as one token: two runs a second apart read the same."""
    return re.sub(r"\d+ (s|min|h|d) ago\s*", "N ago ", text)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(folder, a forked session of tenant default, a paused session of tenant acme)."""
    work = tmp_path_factory.mktemp("reads")
    made = agentrt("run", "--json", "Summarise the 2026 sales by region", cwd=work)
    assert made.code == 0, made.both
    first = json.loads(made.out)["session_id"]
    other = agentrt("run", "--json", "--tenant", "acme", "hi", cwd=work)
    assert json.loads(other.out)["status"] == "PAUSED", other.both
    second = json.loads(other.out)["session_id"]
    shown = json.loads(agentrt("show", first, "--json", "--last", "500", cwd=work).out)
    entry = [e["id"] for e in shown["entries"] if e["type"] == "tool_result"][2]
    assert agentrt("end", first, cwd=work).code == 0
    forked = agentrt("fork", first, "--from", entry, cwd=work)
    assert forked.code == 0, forked.both
    return work, first, second


def _commands(first: str, second: str) -> list[list[str]]:
    return [
        ["show", first],
        ["show", first, "--json"],
        ["show", first, "--branch", "main"],
        ["show", second, "--tenant", "acme"],
        ["show", second, "--tenant", "acme", "--json"],
        ["show", second],  # another tenant's session
        ["show", first, "--user", "someone-else"],
        ["show", "s-0123456789abcdef"],
        ["show", ""],
        ["tool-result", first, "call_3_1", "--offset", "100", "--limit", "80"],
        ["tool-result", first, "call_3_1", "--json"],
        ["tool-result", second, "call_2_1", "--tenant", "acme"],
        ["tool-result", first, "call_nope"],
        ["tool-result", "s-0123456789abcdef", "call_3_1"],
        ["tool-result", "", "call_3_1"],
        ["sessions"],
        ["sessions", "--tenant", "acme", "--json"],
        ["show", first, "--config", "missing.yaml"],
    ]


@pytest.mark.parametrize("index", range(18))
def test_a_read_command_loads_none_of_the_four_and_prints_what_it_did(
    sessions: tuple[Path, str, str], index: int
) -> None:
    """No LangGraph, LangChain, SQLAlchemy or psycopg in the process; the same bytes as a runner's."""
    work, first, second = sessions
    args = _commands(first, second)[index]
    (code, out, err, loaded), by_runner = _both(work, args)
    assert loaded == [], f"agentrt {' '.join(args)} loaded {loaded}"
    assert (code, out, err) == by_runner[:3], f"agentrt {' '.join(args)} changed its output"


def _doctor_commands(first: str, second: str) -> list[list[str]]:
    return [
        ["doctor", first],  # on its forked branch
        ["doctor", first, "--json"],
        ["doctor", first, "--user", "someone-else"],
        ["doctor", second, "--tenant", "acme"],
        ["doctor", second],  # another tenant's session
        ["doctor", "s-0123456789abcdef"],
        ["doctor"],
        ["doctor", "--tenant", "acme", "--json"],
    ]


@pytest.fixture(scope="module")
def kept_pins(sessions: tuple[Path, str, str]) -> None:
    """The pins of this code kept (`agent.loop.surface_cache`): the first `agentrt doctor` of a
    session builds a runner for them, and keeps them for the next."""
    work, first, _ = sessions
    assert agentrt("doctor", first, cwd=work).code == 0


@pytest.mark.parametrize("index", range(8))
def test_the_doctor_loads_none_of_the_four_and_reports_what_a_runner_does(
    sessions: tuple[Path, str, str], kept_pins: None, index: int
) -> None:
    """`agentrt doctor` (a session, the store) on the embedded default: none of the four loaded,
    the report and exit status of a runner's."""
    work, first, second = sessions
    args = _doctor_commands(first, second)[index]
    (code, out, err, loaded), by_runner = _both(work, args)
    assert loaded == [], f"agentrt {' '.join(args)} loaded {loaded}"
    assert (code, out, err) == by_runner[:3], f"agentrt {' '.join(args)} changed its output"


def _session_dir(work: Path, sid: str) -> Path:
    return work / ".agentrt" / "tenants" / "default" / "sessions" / sid


def _flip_a_byte(path: Path) -> None:
    """One bit changed in the middle of a record (not its newline): a corrupt record."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle if data[middle] != 0x0A else middle + 1] ^= 0x04
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(folder, a session with torn tails, a corrupt journal record and a lost blob, a session
    whose checkpoint log has a corrupt record)."""
    work = tmp_path_factory.mktemp("damaged")
    sids = []
    for _ in range(2):
        made = agentrt("run", "--json", "Summarise the 2026 sales by region", cwd=work)
        assert made.code == 0, made.both
        sids.append(json.loads(made.out)["session_id"])
    torn, broken = (_session_dir(work, sid) for sid in sids)
    for log in (torn / "events.jsonl", next(torn.glob("runs/*/checkpoints.jsonl"))):
        with open(log, "ab") as fh:
            fh.write(b'{"_crc":"0')  # a crash mid-append
    _flip_a_byte(torn / "journal.jsonl")
    next(p for p in (work / ".agentrt" / "blobs").rglob("*") if p.is_file()).unlink()
    _flip_a_byte(next(broken.glob("runs/*/checkpoints.jsonl")))
    return work, sids[0], sids[1]


@pytest.mark.parametrize("json_out", [False, True])
def test_the_doctor_of_a_damaged_session_loads_none_of_the_four(
    damaged: tuple[Path, str, str], kept_pins: None, json_out: bool
) -> None:
    """Torn tails, a corrupt journal record, a lost blob: FAILs and WARNs in a runner's words, exit 1."""
    work, torn, _ = damaged
    args = ["doctor", torn, *(["--json"] if json_out else [])]
    (code, out, err, loaded), by_runner = _both(work, args)
    assert loaded == [], f"agentrt {' '.join(args)} loaded {loaded}"
    failed = (
        {c["name"] for c in json.loads(out)["checks"] if c["status"] == "FAIL"}
        if json_out
        else {line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("[FAIL]")}
    )
    assert code == 1 and failed == {"files", "tool_journal", "blobs"}, out
    assert (code, out, err) == by_runner[:3]


def test_the_doctor_of_a_damaged_checkpoint_reports_what_a_runner_does(damaged: tuple[Path, str, str]) -> None:
    """A corrupt checkpoint record: LangGraph's reads word the findings, so the doctor asks it."""
    work, _, broken = damaged
    (code, out, err, _), by_runner = _both(work, ["doctor", broken])
    assert code == 1 and "corrupt" in out, out
    assert (code, out, err) == by_runner[:3]
