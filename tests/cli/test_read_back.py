"""configs/read-back.yaml: compression archives a tool result and the model pages through it.

The script's `expect_in_prompt` fails the run unless the model's prompt held the archived pointer and
each page's `next_offset`, so a COMPLETED run is the scenario played as written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.console import ROOT, agentrt

CONFIG = str(ROOT / "configs" / "read-back.yaml")


def test_the_model_reads_the_archived_result_back(tmp_path: Path) -> None:
    """The run completes; the archived log reads back whole; the three read-backs cover it; doctor OK."""
    ran = agentrt("run", "--config", CONFIG, "--approve-all", "--json", "check the audit log", cwd=tmp_path)
    assert ran.code == 0, ran.both
    result = json.loads(ran.out)
    assert result["status"] == "COMPLETED", result
    sid = result["session_id"]
    log = next(tmp_path.glob(f".agentrt/tenants/default/sessions/{sid}/workspace/data/audit.log")).read_text()
    archived = agentrt("tool-result", sid, "call_3_1", "--limit", "10000", "--json", "--config", CONFIG, cwd=tmp_path)
    assert archived.code == 0, archived.both
    assert json.loads(archived.out)["text"] == log and len(log) == 5760
    shown = agentrt("show", sid, "--config", CONFIG, cwd=tmp_path)
    for n, offset in ((7, 0), (8, 2500), (9, 5000)):
        read = f'read_tool_result [call_{n}_1] {{"tool_call_id": "call_3_1", "offset": {offset}, "limit": 2500}}'
        assert read in shown.out, shown.out
    doctor = agentrt("doctor", sid, "--config", CONFIG, cwd=tmp_path)
    assert doctor.code == 0 and "1 archived results, all in tool_result_store" in doctor.out, doctor.both


def test_each_page_the_model_read_is_the_archived_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What each read_tool_result call handed the model is exactly its slice of the tool's original output."""
    ran = agentrt("run", "--config", CONFIG, "--approve-all", "--json", "check the audit log", cwd=tmp_path)
    assert ran.code == 0, ran.both
    sid = json.loads(ran.out)["session_id"]
    log = next(tmp_path.glob(f".agentrt/tenants/default/sessions/{sid}/workspace/data/audit.log")).read_text()
    monkeypatch.chdir(tmp_path)
    from agent.runner import AgentRunner

    messages = AgentRunner.from_config(CONFIG).state(sid)["messages"]
    pages = [str(m.content) for m in messages if getattr(m, "type", "") == "tool" and m.name == "read_tool_result"]
    assert len(pages) == 3, pages
    for page, offset in zip(pages, (0, 2500, 5000), strict=True):
        assert log[offset : offset + 2500] in page, (offset, page[:200])
