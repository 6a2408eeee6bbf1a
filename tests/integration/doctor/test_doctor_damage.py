"""`agentrt doctor` on damaged sessions: damaged data is reported and never crashes it, a missing
item or archived result fails naming it, torn tails are read in place, and `--repair` cuts them
(leaving a held session alone) and owes every layer a damaged outbox.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agent.core.errors import DataCorrupt, LeaseHeld
from agent.doctor import render
from agent.doctor.repair import repair_session, repair_torn_tails
from agent.runner import AgentRunner
from agent.session.lease_file import FileLease
from agent.session.outbox import Outbox, Owed
from agent.session.session import SessionDocumentCorrupt
from checkpointing.records import decode_record as read_record_bytes
from tests.support.doctor_sessions import SID, _doctor


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


def test_archived_result_missing_from_store_fails(runner: AgentRunner) -> None:
    """A compression event archiving a result the store lacks: the model's context is incomplete (FAIL)."""
    session = runner.manager.get("default", SID)
    runner.manager.memory.record(session, "compression", {"tier": "pointer", "archived_tool_call_ids": ["call_ghost"]})
    check = _doctor(runner).check("model_context")
    assert check.status == "FAIL" and "call_ghost" in check.summary
