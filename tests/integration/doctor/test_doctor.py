"""`agentrt doctor` on real sessions: each symptom of seed §8 gets the right verdict, and nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agent.doctor import DoctorReport, render, run_doctor
from agent.doctor.repair import repair_session, repair_torn_tails
from agent.errors import DataCorrupt, LeaseHeld, RecoveryBlocked
from agent.runner import AgentRunner
from agent.session.lease import FileLease, RedisLease
from agent.session.outbox import Outbox, Owed
from agent.session.session import SessionDocumentCorrupt
from checkpointing.records import RecordLog, atomic_write, canonical_json, read_records
from checkpointing.records import decode_record as read_record_bytes
from tests.support.runners import make_config, make_runner

pytestmark = pytest.mark.integration

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


@pytest.fixture
def redis_tenant() -> Iterator[tuple[str, redis.Redis]]:
    """A unique tenant whose Redis keys are deleted afterwards."""
    tenant = f"doc{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(REDIS_URL)
    yield tenant, client
    keys = list(client.scan_iter(match=f"*agentrt:{tenant}:*"))
    if keys:
        client.delete(*keys)


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
    completed = next(r for r in read_records(path, repair=False) if r["kind"] == "completed")
    RecordLog(path).append(dict(completed))
    report = _doctor(runner)
    check = report.check("tool_journal")
    assert check.status == "FAIL"
    assert completed["tool_call_id"] in check.summary and "more than once" in check.summary


def test_a_journal_result_missing_from_the_checkpoint_logs_warns(runner: AgentRunner) -> None:
    """A COMPLETED record whose result item no run log holds (a machine crash lost it) is named."""
    path = runner.session_dir("default", SID) / "journal.jsonl"
    completed = next(r for r in read_records(path, repair=False) if r["kind"] == "completed")
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


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def _drop_first_item_record(path: Path) -> str:
    """Remove the first item record holding a message (`"k":"i"`) of a checkpoint log; returns its hash."""
    lines = path.read_bytes().split(b"\n")
    i = next(
        n
        for n, line in enumerate(lines)
        if line
        and (rec := read_record_bytes(line)).get("k") == "i"
        and isinstance(rec.get("v"), dict)
        and rec["v"].get("$t") == "msg"
    )
    gone = str(read_record_bytes(lines[i])["h"])
    path.write_bytes(b"\n".join(lines[:i] + lines[i + 1 :]))
    return gone


def _garble_first_line(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(b"{not json" + data[data.index(b"\n") :])


DAMAGE = {
    "session.json": lambda d: (d / "session.json").write_bytes(b"\x00garbage"),
    "lease.json": lambda d: (d / "lease.json").write_bytes(b"{half"),
    "journal.jsonl": lambda d: _garble_first_line(d / "journal.jsonl"),
    "events header": lambda d: _garble_first_line(d / "events.jsonl"),
    "checkpoint item record": lambda d: _drop_first_item_record(next(d.glob("runs/*/checkpoints.jsonl"))),
    "checkpoint torn tail": lambda d: _append(next(d.glob("runs/*/checkpoints.jsonl")), b'{"_crc":"0'),
    "outbox.jsonl": lambda d: (d / "outbox.jsonl").write_bytes(b"{not json\n"),
    "inbox.jsonl": lambda d: (d / "inbox.jsonl").write_bytes(b'{"_crc":"00000000","kind":"submitted"}\n'),
    "session folder": lambda d: [p.unlink() for p in d.glob("*.json*")],
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_data_is_reported_never_crashes(runner: AgentRunner, damage: str) -> None:
    """Whatever is damaged, the doctor returns a report that flags it and leaves the files alone."""
    DAMAGE[damage](runner.session_dir("default", SID))
    report = _doctor(runner)
    assert report.verdict in ("WARN", "FAIL"), render(report)


def test_missing_item_record_fails_naming_hash_and_referrer(runner: AgentRunner) -> None:
    """A lost item record (a value stored once per session under its hash): FAIL naming the hash and
    the checkpoint record (file:line) that references it; the state cannot be restored; nothing changes."""
    path = next((runner.session_dir("default", SID) / "runs").glob("*/checkpoints.jsonl"))
    gone = _drop_first_item_record(path)
    report = _doctor(runner)
    check = report.check("files")
    assert check.status == "FAIL", render(report)
    assert f"item {gone} missing, referenced by {path}:" in check.summary
    assert report.check("model_context").status == "FAIL"
    assert report.check("recovery").status == "FAIL"
    assert report.exit_code() == 1


def test_torn_checkpoint_tail_is_read_in_place(runner: AgentRunner) -> None:
    """A torn last checkpoint record is a WARN naming the file and the repair command; the state
    before it is checked from the real files, which keep their tail (no copy, no .broken)."""
    path = next((runner.session_dir("default", SID) / "runs").glob("*/checkpoints.jsonl"))
    _append(path, b'{"_crc":"0123abcd","k":"c","checkpoint_id":"tor')
    report = _doctor(runner)
    check = report.check("files")
    assert check.status == "WARN", render(report)
    assert str(path) in check.summary and "torn" in check.summary
    assert f"agentrt doctor {SID} --repair" in check.next_step
    assert report.check("tool_pairing").status == "OK"
    assert report.check("model_context").status == "OK" and report.check("recovery").status == "OK"
    assert path.read_bytes().endswith(b'"checkpoint_id":"tor')
    assert not path.with_name(path.name + ".broken").exists()


def test_repair_cuts_torn_tails_through_the_console_script(runner: AgentRunner, tmp_path: Path) -> None:
    """`agentrt doctor ID --repair` moves the torn tails aside to <file>.broken; then every check is OK."""
    directory = runner.session_dir("default", SID)
    cp = next((directory / "runs").glob("*/checkpoints.jsonl"))
    events = directory / "events.jsonl"
    clean = {cp: cp.read_bytes(), events: events.read_bytes()}
    _append(cp, b'{"_crc":"0123abcd","k":"w"')
    _append(events, b'{"_crc":"0')
    cfg = runner.settings.source_path
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    out = subprocess.run(
        ["agentrt", "doctor", SID, "--config", str(cfg), "--repair", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    assert {p: p.read_bytes() for p in clean} == clean
    assert cp.with_name(cp.name + ".broken").read_bytes() == b'{"_crc":"0123abcd","k":"w"'
    assert events.with_name("events.jsonl.broken").read_bytes() == b'{"_crc":"0'
    report = _doctor(runner)
    assert report.verdict == "OK", render(report)


def test_repair_leaves_a_held_session_alone(runner: AgentRunner) -> None:
    """While another process holds the lease, its append in progress looks torn: --repair cuts nothing."""
    path = runner.session_dir("default", SID) / "events.jsonl"
    _append(path, b'{"_crc":"0')
    before = path.read_bytes()
    lease = FileLease(runner.settings.base_dir)
    grant = lease.acquire("default", SID, holder="worker-live", ttl_s=60)
    try:
        with pytest.raises(LeaseHeld, match="worker-live"):
            repair_torn_tails(runner, SID)
    finally:
        lease.release(grant)
    assert path.read_bytes() == before and not path.with_name("events.jsonl.broken").exists()
    assert repair_torn_tails(runner, SID) == [path]  # once free, the tail is cut
    assert path.with_name("events.jsonl.broken").read_bytes() == b'{"_crc":"0'


def test_a_damaged_outbox_stops_reads_until_repair_owes_every_layer(runner: AgentRunner) -> None:
    """A debt record with a flipped bit: the doctor FAILs naming the file and line and changes
    nothing; reading the session stops with the `--repair` command; `--repair` keeps the bytes in
    outbox.jsonl.broken and owes every layer a full replay, which the next read makes."""
    box = Outbox(runner.settings.base_dir)
    box.owe("default", SID, "SQL", Owed.MESSAGES)
    path = box.path("default", SID)
    damaged = path.read_bytes().replace(b'"SQL"', b'"SQM"')
    path.write_bytes(damaged)
    report = _doctor(runner)
    assert report.check("files").status == "FAIL" and f"{path} line 1" in report.check("files").summary
    fresh = AgentRunner.from_config(runner.settings.source_path)
    with pytest.raises(DataCorrupt, match=f"agentrt doctor {SID} --repair"):
        fresh.manager.get("default", SID)
    assert path.read_bytes() == damaged
    done = repair_session(fresh, SID)
    assert [p for p, _ in done] == [path] and "outbox.jsonl.broken" in done[0][1]
    assert path.with_name("outbox.jsonl.broken").read_bytes() == damaged
    assert fresh.manager.get("default", SID).session_id == SID  # replays what SQL is owed first
    assert fresh.manager.outbox.pending_layers("default", SID) == {"L2"}  # no Redis here to replay to
    assert _doctor(runner).check("files").status == "OK"


def test_a_damaged_session_document_fails_where_jsonl_is_the_truth(runner: AgentRunner) -> None:
    """PRIMARY: a flipped bit in session.json is a FAIL naming the file, saying reads stop rather
    than use SQL's copy, and how to restore or accept another copy; a read raises so."""
    doc = runner.session_dir("default", SID) / "session.json"
    data = bytearray(doc.read_bytes())
    data[len(data) // 2] ^= 0x04
    doc.write_bytes(bytes(data))
    fresh = AgentRunner.from_config(runner.settings.source_path)  # a new process: nothing cached in L1
    check = _doctor(fresh).check("session_found")
    assert check.status == "FAIL" and str(doc) in check.summary and "SessionDocumentCorrupt" in check.summary
    assert "restore" in check.next_step and "session.json.broken" in check.next_step
    with pytest.raises(SessionDocumentCorrupt, match=f"agentrt doctor {SID}"):
        fresh.manager.get("default", SID)


def test_compressed_long_task_has_complete_context(tmp_path: Path) -> None:
    """After a run that compressed many times, every archived result is still readable: context OK."""
    r = AgentRunner.from_config(make_config(tmp_path, base="long-task.yaml"))
    assert r.run("read the log", new_session_id=SID).status == "COMPLETED"
    report = _doctor(r)
    check = report.check("model_context")
    assert check.status == "OK", render(report)
    assert check.evidence["compression_events"] > 0  # type: ignore[index,operator]
    assert check.evidence["archived_tool_call_ids"]  # type: ignore[index]


def test_archived_result_missing_from_store_fails(runner: AgentRunner) -> None:
    """A compression event archiving a result the store lacks: the model's context is incomplete (FAIL)."""
    session = runner.manager.get("default", SID)
    runner.manager.memory.record(session, "compression", {"tier": "pointer", "archived_tool_call_ids": ["call_ghost"]})
    check = _doctor(runner).check("model_context")
    assert check.status == "FAIL" and "call_ghost" in check.summary
