"""`agentrt doctor` on real sessions: each symptom of seed §8 gets the right verdict, and nothing changes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from agent.core.errors import RecoveryBlocked
from agent.doctor import render
from agent.runner import AgentRunner
from agent.session.lease_file import FileLease
from agent.session.lease_redis import RedisLease
from checkpointing.fsyncs import atomic_write
from checkpointing.record_log import RecordLog
from checkpointing.records import canonical_json, read_records
from tests.support.doctor_sessions import REDIS_URL, SHOUT, SID, _doctor, _ev
from tests.support.runners import make_config, make_runner


def test_healthy_session_is_all_ok(runner: AgentRunner) -> None:
    """A finished demo session passes every check, exits 0 and prints the §8 checks as JSON."""
    report = _doctor(runner)
    assert {c.name: c.status for c in report.checks} == {c.name: "OK" for c in report.checks}, render(report)
    assert report.exit_code() == 0
    names = [c["name"] for c in report.to_json()["checks"]]
    assert names == [
        "session_found",
        "tenant_user",
        "header",
        "files",
        "model_context",
        "tool_pairing",
        "tool_journal",
        "recovery",
        "blobs",
        "sandbox",
        "lease",
        "session_index",
    ]
    assert set(report.to_json()["checks"][0]) == {"name", "status", "evidence", "next_step"}
    assert "tool_result_store" in _ev(report, "model_context")


def test_unknown_session_fails_clearly(runner: AgentRunner) -> None:
    """An id no layer knows is a FAIL that says so, with a non-zero exit code, and creates nothing."""
    report = _doctor(runner, sid="s-never-ran")
    assert report.check("session_found").status == "FAIL"
    assert "not found" in report.check("session_found").summary
    assert report.exit_code() != 0
    assert not runner.session_dir("default", "s-never-ran").exists()


def test_session_under_another_tenant_reads_as_one_no_tenant_has(runner: AgentRunner) -> None:
    """Asking with another tenant fails in the words of an id nobody has: the tenant that holds the
    session is never named (that is its own business, not the asking tenant's)."""
    theirs, nobodys = _doctor(runner, tenant="other"), _doctor(runner, tenant="other", sid="s-nobody")
    assert theirs.check("session_found").status == "FAIL"
    assert json.dumps(theirs.to_json()).replace(SID, "ID") == json.dumps(nobodys.to_json()).replace("s-nobody", "ID")
    assert "default" not in json.dumps(theirs.to_json()) and "default" not in render(theirs)


def test_wrong_user_reads_not_found(runner: AgentRunner) -> None:
    """Another user's session reads as not found for them, as in `show`: one FAIL, nothing of it shown."""
    report = _doctor(runner, user_id="mallory")
    assert [c.name for c in report.checks] == ["session_found"]
    check = report.check("session_found")
    assert check.status == "FAIL" and "not found for tenant default and user mallory" in check.summary
    assert "local" not in json.dumps(report.to_json())


def test_session_missing_from_l2_only_warns(tmp_path: Path, redis_tenant: tuple[str, redis.Redis]) -> None:
    """With the Redis copy gone, the doctor WARNs naming L2 and the refill, and does not refill it itself."""
    tenant, client = redis_tenant
    first = make_runner(tmp_path, persistence={"redis_url": REDIS_URL})
    first.run("go", new_session_id=SID, tenant_id=tenant)
    key = f"agentrt:{tenant}:session:{SID}"
    assert client.delete(key) == 1
    fresh = make_runner(tmp_path, persistence={"redis_url": REDIS_URL})  # a new process: L1 is empty
    report = _doctor(fresh, tenant=tenant)
    check = report.check("session_found")
    assert check.status == "WARN", render(report)
    assert "L2" in check.summary and "refill" in check.summary
    assert check.evidence["layers"]["L2"] == "absent"  # type: ignore[index]
    assert client.exists(key) == 0
    assert report.exit_code() == 0


def test_changed_toolset_blocks_recovery(tmp_path: Path) -> None:
    """A config that adds a tool: recovery would be blocked because the toolset changed, naming the tool."""
    assert make_runner(tmp_path).run("go", new_session_id=SID).status == "PAUSED"  # a run left to resume
    changed = make_runner(tmp_path, tools=SHOUT)
    report = _doctor(changed)
    check = report.check("recovery")
    assert check.status == "FAIL"
    assert "recovery would be blocked: toolset changed" in check.summary
    assert "shout" in check.summary
    assert "--accept-changes" in check.next_step
    assert report.exit_code() == 1
    with pytest.raises(RecoveryBlocked):  # the prediction holds: resume refuses too
        changed.resume(SID, decision={"approved": True})


def test_duplicated_tool_execution_fails(runner: AgentRunner) -> None:
    """A second COMPLETED record for one tool call in the journal is a FAIL naming the call."""
    path = runner.session_dir("default", SID) / "journal.jsonl"
    completed = next(r for r in read_records(path) if r["kind"] == "completed")
    RecordLog(path).append(dict(completed))
    report = _doctor(runner)
    check = report.check("tool_journal")
    assert check.status == "FAIL"
    assert completed["tool_call_id"] in check.summary and "more than once" in check.summary


def test_a_journal_result_missing_from_the_checkpoint_logs_warns(runner: AgentRunner) -> None:
    """A COMPLETED record whose result item no run log holds (a machine crash lost it) is named."""
    path = runner.session_dir("default", SID) / "journal.jsonl"
    completed = next(r for r in read_records(path) if r["kind"] == "completed")
    lost = {**completed, "tool_call_id": "call-lost", "result_item": {"$i": "0" * 32}}
    lost.pop("result", None)
    RecordLog(path).append(lost)
    check = _doctor(runner).check("tool_journal")
    assert check.status == "WARN" and "call-lost" in check.summary and "not in the checkpoint logs" in check.summary
    assert "outcome unknown" in check.next_step


def test_deleted_blob_fails_naming_blob_and_referrer(runner: AgentRunner) -> None:
    """A deleted tool-result blob is a FAIL naming the blob and the tool result that references it."""
    entry = next(e for e in runner.state(SID)["tool_result_store"] if "blob" in e)
    ref = entry["blob"]["$blob"]
    runner.blobs.path_for(ref).unlink()
    report = _doctor(runner)
    check = report.check("blobs")
    assert check.status == "FAIL"
    assert ref in check.summary and f"tool_result_store {entry['tool_call_id']}" in check.summary
    assert report.exit_code() == 1


def test_held_lease_warns_with_holder_and_expiry(runner: AgentRunner) -> None:
    """A lease held by another worker is reported with its holder and expiry, without taking it."""
    lease = FileLease(runner.settings.base_dir)
    grant = lease.acquire("default", SID, holder="worker-7", ttl_s=60)
    try:
        report = _doctor(runner)
        check = report.check("lease")
        assert check.status == "WARN"
        assert "worker-7" in check.summary
        assert check.evidence["expires_at"] == pytest.approx(grant.expires_at)  # type: ignore[index]
        assert check.evidence["lock_held"] is True  # type: ignore[index]
        # the doctor did not take the lease: its holder still can extend it
        lease.extend(grant)
    finally:
        lease.release(grant)


def test_expired_but_locked_lease_fails(runner: AgentRunner) -> None:
    """A holder whose recorded expiry passed while its lock is still held is stuck: FAIL naming it."""
    lease = FileLease(runner.settings.base_dir)
    grant = lease.acquire("default", SID, holder="worker-stuck", ttl_s=60)
    directory = runner.session_dir("default", SID)
    doc = {"holder": "worker-stuck", "token": grant.token, "expires_at": time.time() - 120}
    atomic_write(directory / "lease.json", canonical_json(doc) + b"\n")
    try:
        check = _doctor(runner).check("lease")
        assert check.status == "FAIL" and "worker-stuck" in check.summary
    finally:
        lease.release(grant)


def test_stale_lease_file_of_a_dead_holder_warns(runner: AgentRunner) -> None:
    """lease.json left by a crashed process (lock free) is a WARN saying the next run takes over."""
    doc = {"holder": "crashed-worker", "token": 9, "expires_at": time.time() + 30}
    atomic_write(runner.session_dir("default", SID) / "lease.json", canonical_json(doc) + b"\n")
    check = _doctor(runner).check("lease")
    assert check.status == "WARN" and "stale" in check.summary


def test_corrupt_checkpoint_is_reported_not_repaired(runner: AgentRunner) -> None:
    """A damaged record mid-file: FAILs with file and line, no crash, and the file stays as it was."""
    path = next((runner.session_dir("default", SID) / "runs").glob("*/checkpoints.jsonl"))
    lines = path.read_bytes().split(b"\n")
    # The first checkpoint record past line 2 (item records precede the records that use them).
    n = next(i for i, line in enumerate(lines) if i >= 2 and b'"turn"' in line)
    lines[n] = lines[n].replace(b'"turn"', b'"tUrn"', 1)
    path.write_bytes(b"\n".join(lines))
    report = _doctor(runner)
    assert report.check("files").status == "FAIL"
    assert f"{path} line {n + 1}" in report.check("files").summary
    assert f"line {n + 1}" in _ev(report, "files")
    assert report.check("recovery").status == "FAIL"
    assert report.exit_code() == 1


def test_torn_event_tail_is_left_in_place(runner: AgentRunner) -> None:
    """A torn last event (crash mid-append) is a WARN; the doctor does not cut it off."""
    path = runner.session_dir("default", SID) / "events.jsonl"
    with open(path, "ab") as fh:
        fh.write(b'{"id":"torn')
    report = _doctor(runner)
    assert report.check("files").status == "WARN"
    assert path.read_bytes().endswith(b'{"id":"torn')
    assert not path.with_name("events.jsonl.broken").exists()


def test_paused_session_waiting_for_approval_is_ok(tmp_path: Path) -> None:
    """A run paused for a human decision passes, and the next step says how to give the decision."""
    r = make_runner(tmp_path)
    assert r.run("write the sales report", new_session_id=SID).status == "PAUSED"
    report = _doctor(r)
    assert report.verdict == "OK", render(report)
    assert "--approve" in report.check("recovery").next_step


def test_file_missing_from_the_room_warns(runner: AgentRunner) -> None:
    """A file of the sandbox checkpoint gone from the room is a WARN naming it (its blob still restores it)."""
    room = runner.session_dir("default", SID) / "workspace"
    (room / "report.md").unlink()
    check = _doctor(runner).check("sandbox")
    assert check.status == "WARN"
    assert check.evidence["missing_in_workspace"] == ["report.md"]  # type: ignore[index]


def test_room_file_whose_blob_is_gone_fails(runner: AgentRunner) -> None:
    """A manifest entry whose blob was deleted: sandbox and blobs FAIL, naming the file and the blob."""
    manifest = runner.state(SID)["sandbox_manifest"]
    runner.blobs.path_for(manifest["report.md"]).unlink()
    report = _doctor(runner)
    assert report.check("sandbox").status == "FAIL" and "report.md" in report.check("sandbox").summary
    blobs = report.check("blobs")
    assert blobs.status == "FAIL" and "sandbox_manifest file report.md" in blobs.summary


def test_held_redis_lease_names_holder_and_key(tmp_path: Path, redis_tenant: tuple[str, redis.Redis]) -> None:
    """With the shared Redis lease held by another worker, the doctor reads holder and expiry from its key."""
    tenant, client = redis_tenant
    r = make_runner(tmp_path, persistence={"redis_url": REDIS_URL, "lease": "redis"})
    r.run("go", new_session_id=SID, tenant_id=tenant)
    other = RedisLease(url=REDIS_URL)
    grant = other.acquire(tenant, SID, holder="worker-r", ttl_s=60)
    try:
        check = _doctor(r, tenant=tenant).check("lease")
        assert check.status == "WARN" and "worker-r" in check.summary
        assert check.evidence["key"] == f"agentrt:{tenant}:lease:{SID}"  # type: ignore[index]
        assert client.get(check.evidence["key"]) is not None  # type: ignore[index]
    finally:
        other.release(grant)


def test_compressed_long_task_has_complete_context(tmp_path: Path) -> None:
    """After a run that compressed many times, every archived result is still readable: context OK."""
    r = AgentRunner.from_config(make_config(tmp_path, base="long-task.yaml"))
    assert r.run("read the log", new_session_id=SID).status == "COMPLETED"
    report = _doctor(r)
    check = report.check("model_context")
    assert check.status == "OK", render(report)
    assert check.evidence["compression_events"] > 0  # type: ignore[index,operator]
    assert check.evidence["archived_tool_call_ids"]  # type: ignore[index]
