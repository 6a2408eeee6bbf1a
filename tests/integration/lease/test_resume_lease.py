"""Concurrent resumes of one session under the real Redis lease, and a paused holder fenced off.

Each test uses its own tenant, so its Redis keys (`agentrt:<tenant>:lease:<session>`) cannot meet
another test's; they are deleted at the end. The winning process is held inside its run by the
drill tools' gate (`bump` waits for a file), so "the others failed while it held the lease" is a
fact of the test, not a race.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.crash import (
    DRILL_TEXT,
    SIGKILL_CODE,
    child_env,
    counter_lines,
    make_drill_config,
    run_cli,
    session_path,
    start_cli,
    wait_for,
)

REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
SID = "lease-1"


@pytest.fixture
def tenant() -> Iterator[str]:
    """A tenant unique to the test; its lease keys are removed afterwards."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"agentrt:{name}:*"))
    if keys:
        client.delete(*keys)


def _crashed_session(tmp_path: Path, tenant: str, ttl: float = 2.0) -> tuple[Path, Path]:
    """A redis-leased drill session of `tenant` crashed early in its run, its dead holder's lease
    lapsed (Redis cannot see a process die: the TTL frees it); (config, counter)."""
    cfg = make_drill_config(
        tmp_path,
        persistence={"lease": "redis", "redis_url": REDIS_URL, "lease_ttl_s": ttl},
        session={"tenant_id": tenant},
    )
    counter = tmp_path / "counter"
    crashed = run_cli(
        ["run", "--config", str(cfg), "--new-session", SID, "--json", DRILL_TEXT],
        child_env(counter, "after_checkpoint_put:3"),
    )
    assert crashed.code == SIGKILL_CODE, crashed.stderr
    assert wait_for(lambda: _holder_or_none(tenant) is None, timeout_s=30)
    return cfg, counter


def _holder(tenant: str) -> str:
    holder = _holder_or_none(tenant)
    assert holder is not None, "nobody holds the lease"
    return holder


@pytest.mark.parametrize("n", [2, 8])
def test_concurrent_resumes_exactly_one_proceeds(tmp_path: Path, tenant: str, n: int) -> None:
    """N processes resume one session at once: one finishes, every other fails at once with LeaseHeld."""
    cfg, counter = _crashed_session(tmp_path, tenant)
    gate = tmp_path / "gate"
    env = child_env(counter, AGENTRT_DRILL_GATE=str(gate))
    procs = [start_cli(["resume", SID, "--config", str(cfg), "--json"], env) for _ in range(n)]
    try:
        waiting = Path(str(gate) + ".waiting")
        assert wait_for(lambda: waiting.exists() or all(p.poll() is not None for p in procs), timeout_s=120)
        assert waiting.exists(), [p.communicate() for p in procs]
        holder = _holder(tenant)
        # The winner is parked inside a tool with the lease held: every other process must end
        # on its own (LeaseHeld), without the gate ever opening.
        losers = []
        for p in procs:
            if holder.split(":")[1] == str(p.pid):
                continue
            out, err = p.communicate(timeout=120)
            losers.append((p.returncode, err))
        assert len(losers) == n - 1
        for code, err in losers:
            assert code == 4  # LeaseHeld: a conflict
            text = " ".join(err.split())  # rich wraps long lines, see test_lease_held_error_is_one_line
            assert text.startswith(f"agentrt: error: session {SID} is held by {holder}"), err
        gate.touch()
        winner = next(p for p in procs if holder.split(":")[1] == str(p.pid))
        out, err = winner.communicate(timeout=120)
        assert winner.returncode == 0, err
        assert '"status": "COMPLETED"' in out
    finally:
        gate.touch()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    bumped = counter_lines(counter)
    assert sorted(bumped) == sorted(set(bumped))


def _snapshot(session: Path) -> dict[str, bytes]:
    """Bytes of the files a fenced-off writer must not change."""
    files = [session / "events.jsonl", session / "journal.jsonl", *sorted(session.glob("runs/*/*.jsonl"))]
    return {str(f.relative_to(session)): f.read_bytes() for f in files if f.exists()}


def test_paused_holder_cannot_write_after_takeover(tmp_path: Path, tenant: str) -> None:
    """A holder SIGSTOPped past its lease TTL is fenced: after another took over, none of its writes land."""
    cfg, counter = _crashed_session(tmp_path, tenant, ttl=1.0)
    gate = tmp_path / "gate"
    stale = start_cli(["resume", SID, "--config", str(cfg), "--json"], child_env(counter, AGENTRT_DRILL_GATE=str(gate)))
    try:
        assert wait_for(lambda: Path(str(gate) + ".waiting").exists(), timeout_s=120)
        stale_holder = _holder(tenant)
        stale.send_signal(signal.SIGSTOP)
        # The stopped holder's heartbeat cannot extend: wait for its lease to lapse in Redis.
        assert wait_for(lambda: _holder_or_none(tenant) is None, 30)
        fresh = run_cli(["resume", SID, "--config", str(cfg), "--json"], child_env(counter))
        assert fresh.code == 0, fresh.stderr
        assert '"status": "COMPLETED"' in fresh.stdout
        session = session_path(cfg, SID, tenant)
        before = _snapshot(session)
        gate.touch()
        stale.send_signal(signal.SIGCONT)
        _, err = stale.communicate(timeout=120)
    finally:
        if stale.poll() is None:
            stale.send_signal(signal.SIGCONT)
            stale.kill()
            stale.communicate()
    assert stale.returncode != 0
    assert "refused" in err and "newer owner" in err, err
    assert _snapshot(session) == before, "the fenced-off holder changed the session's logs"
    assert stale_holder != _holder_or_none(tenant)
    status = subprocess.run(
        ["python", "-m", "agent.cli", "show", SID, "--config", str(cfg), "--tenant", tenant, "--json"],
        env=child_env(counter),
        capture_output=True,
        text=True,
        check=False,
        cwd=str(Path(__file__).parents[3]),
    )
    assert '"last_run_status": "COMPLETED"' in status.stdout, status.stdout[:2000] + status.stderr


def _holder_or_none(tenant: str) -> str | None:
    value = redis.Redis.from_url(REDIS_URL, decode_responses=True).get(f"agentrt:{tenant}:lease:{SID}")
    return str(value).split("|", 1)[1] if value is not None else None


def test_lease_held_error_is_one_line(tmp_path: Path, tenant: str) -> None:
    """A resume refused with LeaseHeld prints exactly one error line naming the holder."""
    cfg, counter = _crashed_session(tmp_path, tenant)
    gate = tmp_path / "gate"
    holder_env = child_env(counter, AGENTRT_DRILL_GATE=str(gate))
    holder_proc = start_cli(["resume", SID, "--config", str(cfg), "--json"], holder_env)
    try:
        assert wait_for(lambda: Path(str(gate) + ".waiting").exists() or holder_proc.poll() is not None, 120)
        refused = run_cli(["resume", SID, "--config", str(cfg), "--json"], child_env(counter))
    finally:
        gate.touch()
        holder_proc.communicate(timeout=120)
    assert refused.code == 4
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "is held by" in lines[0], refused.stderr
