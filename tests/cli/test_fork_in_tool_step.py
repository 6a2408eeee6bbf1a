"""A fork from an entry inside a tool step (the model asked for two tools; fork at the first
result) starts from the state before that request, so the branch's next turn has a whole history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.console import agentrt


def _entry(work: Path, sid: str, kind: str, call: str) -> str:
    log = work / ".agentrt" / "tenants" / "default" / "sessions" / sid / "events.jsonl"
    for line in log.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("type") == kind and rec["payload"].get("tool_call_id") == call:
            return str(rec["id"])
    raise AssertionError(f"no {kind} entry for {call}")


@pytest.mark.parametrize(("kind", "call"), [("tool_result", "call_3_1"), ("tool_call", "call_3_2")])
def test_a_fork_inside_a_tool_step_runs_and_the_doctor_finds_it_sound(tmp_path: Path, kind: str, call: str) -> None:
    ran = agentrt("run", "--approve-all", "--new-session", "s-step", "Summarise the sales", cwd=tmp_path)
    assert ran.code == 0, ran.both
    entry = _entry(tmp_path, "s-step", kind, call)
    forked = agentrt("fork", "s-step", "--from", entry, "--json", cwd=tmp_path)
    assert forked.code == 0, forked.both
    again = agentrt("run", "--session", "s-step", "--approve-all", "--json", "Only the West, please", cwd=tmp_path)
    assert again.code == 0, again.both
    assert json.loads(again.out)["status"] == "COMPLETED"
    doctor = agentrt("doctor", "s-step", cwd=tmp_path)
    assert doctor.code == 0 and "verdict: OK" in doctor.out, doctor.both
    shown = agentrt("show", "s-step", cwd=tmp_path)
    assert shown.code == 0 and "user> Only the West, please" in shown.out, shown.both
