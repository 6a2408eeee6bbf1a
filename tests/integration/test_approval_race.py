"""One decision for one approval: eight plain `agentrt resume S --approve --interrupt IID` processes
started at once (no barrier, no sleeps) on each lease backend, then a late approver.

Per repetition: a fresh session paused before `bump` (an unsafe user tool that needs approval and
appends a line to a counter file outside base_dir), then 8 racing approvers. Exactly one applies
the approval (one `hitl_decision` entry, one journal intent + completion, one counter line) and the
session's run ends COMPLETED; every other process exits 4 with one line saying the approval is no
longer pending, or that another process holds the session lease.

The race runs once per backend by default, 20 times with `AGENTRT_FULL_DRILLS=1`;
`AGENTRT_RACE_REPS=N` sets any number:

    AGENTRT_RACE_REPS=20 python -m pytest -q tests/integration/test_approval_race.py
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from tests.cli.console import Ran, agentrt, env, script
from tests.support.crash import make_drill_config
from tests.support.drills import size

REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
REPS = size("AGENTRT_RACE_REPS", sample=1, full=20)
RACERS = 8
BUMP = {"path": "tests.support.drill_tools:bump", "effect": "unsafe", "requires_approval": True}
SCRIPT = {
    "on_exhausted": "fail",
    "responses": [{"tool_calls": [{"name": "bump", "args": {"label": "approved"}}]}, {"content": "done"}],
}
REFUSALS = ("is no longer pending", "is held by")


@dataclass
class Setup:
    """A lease backend's config and the tenant its sessions live in."""

    backend: str
    config: Path
    tenant: str
    base: Path


@pytest.fixture(params=["file", "redis"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    """The embedded default with the tiny approval script, on the file lease or the Redis lease (own tenant)."""
    backend = str(request.param)
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    persistence: dict[str, Any] = {"lease": backend}
    if backend == "redis":
        persistence["redis_url"] = REDIS_URL
    script_file = tmp_path / "approve.yaml"
    script_file.write_text(yaml.safe_dump(SCRIPT, sort_keys=False))
    cfg = make_drill_config(
        tmp_path,
        tools={"builtins": [], "custom": [BUMP]},
        loop={"planning": "never"},
        model={"script": str(script_file)},
        session={"tenant_id": tenant},
        persistence=persistence,
    )
    yield Setup(backend, cfg, tenant, tmp_path)
    if backend == "redis":
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"*{tenant}*"))
        if keys:
            client.delete(*keys)


def _paused(s: Setup, counter: Path) -> tuple[str, str]:
    """A new session paused before `bump`: (session id, interrupt id)."""
    ran = agentrt("run", "--config", str(s.config), "--json", "bump it", cwd=s.base, extra_env=_counter(counter))
    assert ran.code == 0, ran.both
    result = json.loads(ran.out)
    assert result["status"] == "PAUSED", result
    (request,) = result["pending_approval"]
    assert request["name"] == "bump" and request["interrupt_id"], request
    return str(result["session_id"]), str(request["interrupt_id"])


def _counter(counter: Path) -> dict[str, str]:
    return {"AGENTRT_DRILL_COUNTER": str(counter)}


def _approve_at_once(s: Setup, sid: str, iid: str, counter: Path) -> list[Ran]:
    """RACERS approvers started back to back, then each waited for."""
    cmd = [script(), "resume", sid, "--config", str(s.config), "--approve", "--interrupt", iid, "--json"]
    procs = [
        subprocess.Popen(
            cmd,
            cwd=s.base,
            env=env(**_counter(counter)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(RACERS)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        out.append(Ran(p.returncode, stdout, stderr))
    return out


def _session_dir(s: Setup, sid: str) -> Path:
    return s.base / "agentrt" / "tenants" / s.tenant / "sessions" / sid


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _check_one_applied(s: Setup, sid: str, ran: list[Ran], counter: Path) -> None:
    """One approver completed the run; the others were refused with the message; the tool ran once."""
    winners = [r for r in ran if r.code == 0]
    assert len(winners) == 1, [r.both for r in ran]
    result = json.loads(winners[0].out)
    assert result["status"] == "COMPLETED" and result["answer"] == "done", result
    for r in ran:
        if r.code != 0:
            assert r.code == 4, r.both
            line = r.error_line()
            assert any(m in line for m in REFUSALS), line
    events = _records(_session_dir(s, sid) / "events.jsonl")
    types = [e.get("type") for e in events]
    assert types.count("hitl_decision") == 1 and types.count("run_resume") == 1, types
    journal = [j for j in _records(_session_dir(s, sid) / "journal.jsonl") if j.get("tool_call_id") == "call_1_1"]
    assert [j["kind"] for j in journal] == ["intent", "completed"], journal
    assert counter.read_text().splitlines() == ["approved"]
    shown = agentrt("show", sid, "--config", str(s.config), "--json", cwd=s.base)
    info = json.loads(shown.out)
    assert info["session"]["last_run_status"] == "COMPLETED" and info["pending_approvals"] == [], info


def _snapshot(directory: Path) -> dict[str, bytes]:
    """Every file of a session directory (lease bookkeeping aside) by relative path."""
    lease_files = {"lease.lock", "lease.state.lock", "lease.json", "lease.token", "fence.lock", "fence.json"}
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name not in lease_files
    }


def test_eight_approvers_at_once_exactly_one_applies(setup: Setup) -> None:
    """8 racing `resume --approve --interrupt IID`, REPS times: one applies, 7 exit 4, the tool runs once."""
    outcomes: list[tuple[float, int, int]] = []
    for rep in range(REPS):
        counter = setup.base / f"counter-{rep}"
        sid, iid = _paused(setup, counter)
        began = time.monotonic()
        ran = _approve_at_once(setup, sid, iid, counter)
        took = time.monotonic() - began
        _check_one_applied(setup, sid, ran, counter)
        held = sum(1 for r in ran if "is held by" in r.err)
        outcomes.append((took, held, RACERS - 1 - held))
    # A figure for the report (never asserted): seconds per race, and how the losers were refused.
    print(f"\n{setup.backend}: {REPS} reps; (seconds, lease held, no longer pending) = {outcomes}")


def test_late_approver_changes_nothing(setup: Setup) -> None:
    """After the approval was applied, `resume --approve --interrupt IID` exits 4 and leaves every byte."""
    counter = setup.base / "counter"
    sid, iid = _paused(setup, counter)
    first = agentrt(
        "resume", sid, "--config", str(setup.config), "--approve", "--interrupt", iid, "--json",
        cwd=setup.base, extra_env=_counter(counter),
    )  # fmt: skip
    assert first.code == 0 and json.loads(first.out)["status"] == "COMPLETED", first.both
    before = _snapshot(_session_dir(setup, sid))
    for decision in ("--approve", "--reject"):
        late = agentrt(
            "resume", sid, "--config", str(setup.config), decision, "--interrupt", iid,
            cwd=setup.base, extra_env=_counter(counter),
        )  # fmt: skip
        assert late.code == 4, late.both
        assert f"approval {iid} is no longer pending" in late.error_line()
    assert _snapshot(_session_dir(setup, sid)) == before
    assert counter.read_text().splitlines() == ["approved"]


def test_wrong_interrupt_id_changes_nothing_and_names_the_pending_one(setup: Setup) -> None:
    """An approval id the session never asked for is not found (exit 3) naming the pending one; the
    session stays paused and the named approval still works afterwards."""
    counter = setup.base / "counter"
    sid, iid = _paused(setup, counter)
    before = _snapshot(_session_dir(setup, sid))
    wrong = agentrt(
        "resume", sid, "--config", str(setup.config), "--approve", "--interrupt", "0" * 32,
        cwd=setup.base, extra_env=_counter(counter),
    )  # fmt: skip
    assert wrong.code == 3, wrong.both
    assert f"approval {iid} for tool bump is pending now" in wrong.error_line()
    assert _snapshot(_session_dir(setup, sid)) == before and not counter.exists()
    shown = agentrt("show", sid, "--config", str(setup.config), cwd=setup.base)
    assert f"agentrt resume {sid} --approve --interrupt {iid}" in shown.out, shown.both
    done = agentrt(
        "resume", sid, "--config", str(setup.config), "--approve", "--interrupt", iid, "--json",
        cwd=setup.base, extra_env=_counter(counter),
    )  # fmt: skip
    assert done.code == 0 and json.loads(done.out)["status"] == "COMPLETED", done.both
