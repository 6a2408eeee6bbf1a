"""A session file of on-disk format 1 blocks `agentrt resume` with its own reason, and stays as it was."""

from __future__ import annotations

import json
import os
import subprocess
import zlib
from pathlib import Path

import pytest

from agent.doctor import run_doctor
from agent.runner import AgentRunner
from agent.runner.recovery import OLD_FORMAT
from checkpointing.records import decode_record, json_std_canonical
from tests.support.runners import ROOT, make_config

SID = "s-old-format"


def _format1(rec: dict[str, object]) -> bytes:
    """`rec` framed as format 1 wrote it: canonical JSON with the CRC32 of it as a trailing `_crc`."""
    body = json_std_canonical(rec)
    return body[:-1] + b',"_crc":"%08x"}\n' % (zlib.crc32(body) & 0xFFFFFFFF)


def _agentrt(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["agentrt", *argv], capture_output=True, text=True, env=env, timeout=300)


PLANT = {
    # the whole checkpoint log as an older agentrt left it
    "whole file": lambda data: b"".join(_format1(decode_record(line)) for line in data.splitlines()),
    # one record appended by an older agentrt after the format-2 ones
    "one line": lambda data: data + _format1(decode_record(data.splitlines()[-1])),
}


@pytest.mark.parametrize("plant", sorted(PLANT))
def test_format1_checkpoint_log_blocks_resume_untouched(tmp_path: Path, plant: str) -> None:
    """Exit 5 (RECOVERY_BLOCKED), one stderr line naming the reason and the file, the run marked
    RECOVERY_BLOCKED, file bytes unchanged; the doctor names the same reason."""
    cfg = make_config(tmp_path)
    ran = _agentrt("run", "--config", str(cfg), "--new-session", SID, "--json", "write the sales report")
    assert ran.returncode == 0 and json.loads(ran.stdout)["status"] == "PAUSED", ran.stderr
    session = tmp_path / "agentrt" / "tenants" / "default" / "sessions" / SID
    (log,) = session.glob("runs/*/checkpoints.jsonl")
    log.write_bytes(PLANT[plant](log.read_bytes()))
    planted = log.read_bytes()

    out = _agentrt("resume", SID, "--config", str(cfg), "--approve")
    assert out.returncode == 5, out.stdout + out.stderr  # RECOVERY_BLOCKED
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    # a long path is shown by its last components, so the line stays short and still names the file
    named = f"…/{SID}/runs/{log.parent.name}/{log.name}"
    assert f"RECOVERY_BLOCKED at validate_identity: {OLD_FORMAT} ({named}:" in lines[0], lines[0]
    assert "start a new session" in lines[0]
    assert log.read_bytes() == planted
    assert not log.with_name(log.name + ".broken").exists()
    blocked = [decode_record(x) for x in (session / "events.jsonl").read_bytes().splitlines()]
    assert [e["payload"]["reason"] for e in blocked if e.get("type") == "recovery_blocked"] == [OLD_FORMAT]
    assert "RECOVERY_BLOCKED" in (session / "session.json").read_text()

    again = _agentrt("resume", SID, "--config", str(cfg), "--approve", "--accept-changes")
    assert again.returncode == 5 and OLD_FORMAT in again.stderr  # no override skips it
    assert log.read_bytes() == planted

    report = run_doctor(AgentRunner.from_config(cfg), SID)
    files = report.check("files")
    assert files.status == "FAIL" and OLD_FORMAT in files.summary and str(log) in files.summary
    assert report.check("recovery").status == "FAIL"
    assert log.read_bytes() == planted
