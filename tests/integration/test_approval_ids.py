"""Approval ids through every door: the Python API, `agentrt serve` (LangGraph's interrupt-id map) and
the Celery `submit_decision`. A decision naming an approval that is not pending (never asked: not
found; answered: a conflict) changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from agent.core.errors import ApprovalNotFound, ApprovalNotPending, InputError
from agent.runner import AgentRunner
from tests.support.runners import make_config
from tests.support.serve import serving

PLAN = {"content": '{"plan": "publish", "todos": ["write", "publish"]}'}
WRITE = {"tool_calls": [{"name": "write_file", "args": {"path": "r.md", "content": "# r\n"}}]}
PUBLISH = {"tool_calls": [{"name": "publish_report", "args": {"path": "r.md", "channel": "team"}}]}
SCRIPT = [PLAN, WRITE, PUBLISH, {"content": "done"}]
STALE = "0" * 32


def _files(directory: Path) -> dict[str, bytes]:
    skip = {"lease.lock", "lease.state.lock", "lease.json", "lease.token", "fence.lock", "fence.json"}
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in directory.rglob("*")
        if p.is_file() and p.name not in skip
    }


def test_python_api_names_the_approval_it_answers(tmp_path: Path) -> None:
    """RunResult, show() and the hitl entries carry the interrupt id; an id never asked or already
    answered raises and changes nothing."""
    runner = AgentRunner.from_config(make_config(tmp_path, SCRIPT))
    paused = runner.run("write and publish")
    (request,) = paused.pending_approval
    iid = request["interrupt_id"]
    assert runner.show(paused.session_id)["pending_approvals"] == [request]
    folder = runner.session_dir("default", paused.session_id)
    before = _files(folder)
    with pytest.raises(ApprovalNotFound, match=f"never asked for approval {STALE}"):
        runner.resume(paused.session_id, decision={"approved": True}, interrupt_id=STALE)
    with pytest.raises(InputError, match="not an approval id"):
        runner.resume(paused.session_id, decision={"approved": True}, interrupt_id="x\n\x1b[31m")
    with pytest.raises(InputError, match="add --approve or --reject"):
        runner.resume(paused.session_id, interrupt_id=iid)
    assert _files(folder) == before
    done = runner.resume(paused.session_id, decision={"approved": True}, interrupt_id=iid)
    assert done.status == "COMPLETED" and (folder / "workspace" / "outbox" / "team-r.md").exists()
    entries = runner.manager.event_log("default", paused.session_id).entries()
    asked = [e.payload for e in entries if e.type == "hitl_request"]
    decided = [e.payload for e in entries if e.type == "hitl_decision"]
    assert [a["interrupt_id"] for a in asked] == [iid] and [d["interrupt_id"] for d in decided] == [iid]
    with pytest.raises(ApprovalNotPending, match="none is pending now"):
        runner.resume(paused.session_id, decision={"approved": False}, interrupt_id=iid)


def test_serve_resume_map_by_interrupt_id(tmp_path: Path) -> None:
    """`command={"resume": {IID: answer}}`: an IID never asked is a 404, one answered a 409, and
    neither changes anything; the pending one completes."""
    config = make_config(tmp_path, SCRIPT)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        first = client.runs.wait(tid, "agentrt", input={"user_input": "write and publish"})
        assert isinstance(first, dict)
        (intr,) = first["__interrupt__"]
        folder = tmp_path / "agentrt" / "tenants" / "default" / "sessions" / tid
        before = _files(folder)
        with pytest.raises(httpx.HTTPStatusError) as caught:
            client.runs.wait(tid, "agentrt", command={"resume": {STALE: {"approved": True}}})
        assert caught.value.response.status_code == 404
        assert f"never asked for approval {STALE}" in caught.value.response.text
        assert _files(folder) == before
        done = client.runs.wait(tid, "agentrt", command={"resume": {intr["id"]: {"approved": True}}})
        assert isinstance(done, dict) and "__interrupt__" not in done
        assert client.threads.get_state(tid)["values"]["finish_reason"] == "completed"
        with pytest.raises(httpx.HTTPStatusError) as again:
            client.runs.wait(tid, "agentrt", command={"resume": {intr["id"]: {"approved": True}}})
        assert again.value.response.status_code == 409 and "no longer pending" in again.value.response.text


def test_submit_decision_refuses_an_approval_that_is_not_pending(tmp_path: Path) -> None:
    """With workers configured, a decision for an id no submitted turn waits on is refused before queueing."""
    workers: dict[str, Any] = {"broker_url": "redis://127.0.0.1:6379/15", "result_backend": "redis://127.0.0.1:6379/15"}
    runner = AgentRunner.from_config(make_config(tmp_path, SCRIPT, workers=workers))
    with pytest.raises(ApprovalNotPending, match="no longer pending"):
        runner.submit_decision("s-none", {"approved": True}, interrupt_id=STALE)
    assert not list((tmp_path / "agentrt").rglob("*inbox*"))  # nothing was recorded for a worker
