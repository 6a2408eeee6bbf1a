"""Sessions for the `agentrt doctor` tests: a runner on the shipped demo, a Redis tenant of its own,
the doctor's report of a session and a snapshot of its files."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agent.doctor import DoctorReport, render, run_doctor
from agent.runner import AgentRunner
from tests.support.runners import make_runner

REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
SID = "s-doctor"
SHOUT = {"custom": [{"path": "tests.support.user_tools:shout", "effect": "read_only"}]}


def _snapshot(runner: AgentRunner, tenant: str = "default", sid: str = SID) -> dict[str, bytes]:
    """Every file of the session folder and the blob volume, by path."""
    out: dict[str, bytes] = {}
    for root in (runner.session_dir(tenant, sid), runner.settings.base_dir / "blobs"):
        if root.exists():
            out.update({str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()})
    return out


def _doctor(runner: AgentRunner, tenant: str = "default", sid: str = SID, **kw: str) -> DoctorReport:
    """Run the doctor and assert it left every byte of the session as it was."""
    before = _snapshot(runner, tenant, sid)
    report = run_doctor(runner, sid, tenant_id=tenant, **kw)
    assert _snapshot(runner, tenant, sid) == before, "the doctor modified the session"
    render(report)  # the human form renders for every report
    json.dumps(report.to_json())
    return report


def _ev(report: DoctorReport, name: str) -> str:
    return json.dumps(report.check(name).evidence)


@pytest.fixture
def runner(tmp_path: Path) -> AgentRunner:
    """A runner whose session SID ran the demo task to the end."""
    r = make_runner(tmp_path)
    result = r.run("write the sales report", new_session_id=SID)
    while result.status == "PAUSED":  # the demo asks a human before publishing
        result = r.resume(SID, decision={"approved": True})
    assert result.status == "COMPLETED"
    return r


@pytest.fixture
def redis_tenant() -> Iterator[tuple[str, redis.Redis]]:
    """A unique tenant whose Redis keys are deleted afterwards."""
    tenant = f"doc{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(REDIS_URL)
    yield tenant, client
    keys = list(client.scan_iter(match=f"*agentrt:{tenant}:*"))
    if keys:
        client.delete(*keys)
