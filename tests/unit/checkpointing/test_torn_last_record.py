"""Damage to the last record of any file of a session never strands it: every byte offset, in process.

Three sessions of the demo are made once per module with the installed `agentrt` (COMPLETED with
`--approve-all`, PAUSED at its approval, RUNNING killed by a crash after its third tool call); an
inbox and an outbox are added through their owners so every kind of file exists. Then, for each
record of each file's LAST record, every truncation (0 = the whole record gone and the file
ending cleanly, up to len-1 = only the newline missing) and every bit flip of its final newline is
checked in memory against the storage layer's verify API (`checkpointing.verify`) and the reads
recovery does (`checkpointing.records`, the owners' readers), microseconds a case:

- a record log: a truncation is a torn tail (continues): the reads return every record but the
  last, nothing blocks, and the repair would cut exactly the torn bytes; a flipped final newline
  leaves a record that verifies: it is read as it was, and the repair puts the newline back;
- a document (`session.json`, `fence.json`): refused with an error naming the file, and the
  verify API marks it repairable (the repair command is `agentrt doctor ID --repair`);
- the lease's files (`lease.token`, `lease.json`): a grant goes on (the counter is floored by
  the fence; the holder record only names the holder);
- an index (`*.idx`): ignored by its owner (the log is scanned instead), removable.

The boundary offsets are then repaired for real on a copy of the folder (`repair_session`): every
whole record stays, the torn bytes are kept in `<file>.broken`, and the saver serves the last
whole checkpoint. The CLI sweep (tests/cli/test_torn_tail_cli.py) runs the sessions on.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.core.errors import DataCorrupt
from agent.session.inbox import Inbox
from agent.session.lease_file import _granting_counter, read_lease_state, read_token_counter
from agent.session.outbox import Outbox, Owed
from agent.session.stores.jsonl import read_session_file
from checkpointing import indexfile, records
from checkpointing.exceptions import CheckpointingError
from checkpointing.fencing import FencingGuard
from checkpointing.layout import broken_file
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.verify import FileKind, Health, repair_session, verify_bytes, verify_session
from tests.cli.console import agentrt

TEXT = "Summarise the 2026 sales by region"
STATUSES = ("COMPLETED", "PAUSED", "RUNNING")
LOGS = ("events.jsonl", "journal.jsonl", "inbox.jsonl", "outbox.jsonl")


def _make(where: Path, status: str) -> tuple[Path, str]:
    where.mkdir()
    extra = {"AGENTRT_CRASH_AT": "after_tool_execute:3"} if status == "RUNNING" else None
    args = ["run", "--approve-all", TEXT] if status != "PAUSED" else ["run", TEXT]
    ran = agentrt(*args, cwd=where, extra_env=extra)
    assert ran.code == (137 if status == "RUNNING" else 0), ran.err
    base = where / ".agentrt"
    (sid,) = [p.name for p in (base / "tenants/default/sessions").iterdir()]
    inbox = Inbox(base, "default", sid)
    inbox.submit("again", "t-1", "local")
    inbox.mark_started("t-1", None, "w1")
    Outbox(base).owe("default", sid, "SQL", Owed.MESSAGES)
    return base, sid


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """status -> (base_dir, session id), made once."""
    root = tmp_path_factory.mktemp("torn")
    return {s: _make(root / s.lower(), s) for s in STATUSES}


def _files(folder: Path) -> Iterator[str]:
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and path.stat().st_size and not rel.startswith("workspace/") and not rel.endswith(".lock"):
            yield rel


def _last(data: bytes) -> int:
    """Where the last record of `data` (newline-terminated) starts."""
    return data.rfind(b"\n", 0, len(data) - 1) + 1


def _damages(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Every truncation inside the last record, and each one-bit flip of its final newline."""
    start = _last(data)
    for k in range(len(data) - start):
        yield f"cut+{k}", data[: start + k]
    for bit in range(8):
        yield f"flip{bit}", data[:-1] + bytes([data[-1] ^ (1 << bit)])


def _kind(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    if name.endswith(".idx"):
        return "index"
    if name.endswith(".jsonl"):
        return "log"
    return name


@pytest.mark.parametrize("status", STATUSES)
def test_every_offset_of_every_last_record_continues_or_names_its_repair(
    sessions: dict[str, tuple[Path, str]], status: str, tmp_path: Path
) -> None:
    """Each damage is a torn tail (reads go on without the last record) or a refusal that the
    verify API marks repairable; never a block nothing repairs, never a read of other state."""
    base, sid = sessions[status]
    folder = base / "tenants/default/sessions" / sid
    kinds_seen: set[str] = set()
    scratch = tmp_path / "tenants/default/sessions" / sid
    scratch.mkdir(parents=True)
    for rel in _files(folder):
        data = (folder / rel).read_bytes()
        kind = _kind(rel)
        kinds_seen.add(kind)
        target = scratch / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        whole = records.scan_bytes(target, data).records if kind == "log" else []
        if kind == "index":
            shutil.copyfile(folder / rel.removesuffix(".idx"), target.with_suffix(""))
        for label, damaged in _damages(data):
            case = f"{status} {rel} {label}"
            report = verify_bytes(scratch, rel, damaged)
            if kind == "log" and label.startswith("flip"):
                # The record still verifies: served as it was, its newline put back by a repair.
                assert report.health is Health.TERMINATOR and report.repairable, case
                assert report.records == len(whole) and report.good == len(data), case
                tail = records.scan_bytes(target, damaged[_last(data) :], _last(data))
                assert tail.records == whole[-1:], case
                continue
            if kind == "log":
                assert report.health in (Health.OK, Health.TORN) and not report.health.blocks, case
                assert report.good == _last(data) and report.records == len(whole) - 1, case
                assert report.health is Health.TORN or damaged == data[: _last(data)], case
                # What a read serves: the prefix is the same bytes, and the tail yields no record.
                tail = records.scan_bytes(target, damaged[_last(data) :], _last(data))
                assert tail.records == [] and tail.good == _last(data), case
                continue
            target.write_bytes(damaged)
            if kind == "index":
                assert report.health is Health.STALE and report.repairable, case
                assert indexfile.load(target.with_suffix("")) is None, case  # ignored: the log is scanned
            elif kind in ("session.json", "fence.json"):
                assert report.kind is FileKind.DOCUMENT and report.health is Health.CORRUPT, case
                assert report.repairable, case
                with pytest.raises(CheckpointingError, match=rel):
                    if kind == "session.json":
                        read_session_file(target)
                    else:
                        FencingGuard(scratch).highest()
            elif kind == "lease.token":
                assert _granting_counter(target) == 0, case  # a grant counts from the fence
                if damaged:
                    with pytest.raises(DataCorrupt, match=r"lease\.token is damaged"):
                        read_token_counter(target)
            elif kind == "lease.json":
                if damaged:
                    with pytest.raises(DataCorrupt, match=r"lease\.json is damaged"):
                        read_lease_state(target)
            else:
                raise AssertionError(f"{case}: a file kind this test does not know")
    expected = {"log", "session.json", "fence.json", "lease.token"}
    # A killed run never saved its indexes; only it left its holder record behind.
    expected |= {"lease.json"} if status == "RUNNING" else {"index"}
    assert expected <= kinds_seen, kinds_seen


BOUNDARY = ("0", "1", "mid", "len-2", "len-1", "flip")


def _boundary(data: bytes, at: str) -> bytes:
    start = _last(data)
    n = len(data) - start
    if at == "flip":
        return data[:-1] + bytes([data[-1] ^ 0x01])
    return data[: start + {"0": 0, "1": 1, "mid": n // 2, "len-2": n - 2, "len-1": n - 1}[at]]


def _newest_checkpoint(recs: list[dict[str, Any]]) -> str:
    return max(str(r["checkpoint_id"]) for r in recs if r.get("k") == "c" and not r.get("checkpoint_ns"))


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("at", BOUNDARY)
def test_the_repair_keeps_every_whole_record(
    sessions: dict[str, tuple[Path, str]], status: str, at: str, tmp_path: Path
) -> None:
    """`repair_session` on each damaged log leaves the records before the last one, keeps the cut
    bytes in <file>.broken, and the saver serves the newest whole checkpoint before and after."""
    base, sid = sessions[status]
    rel_folder = Path("tenants/default/sessions") / sid
    logs = [r for r in _files(base / rel_folder) if r.endswith(".jsonl")]
    assert {"events.jsonl", "journal.jsonl", "inbox.jsonl", "outbox.jsonl"} <= set(logs)
    for rel in logs:
        copy = tmp_path / f"{rel.replace('/', '_')}"
        shutil.copytree(base, copy, symlinks=True)
        folder = copy / rel_folder
        data = (folder / rel).read_bytes()
        whole = [records.loads(b) for _, b in records.scan_bytes(folder / rel, data).records]
        damaged = _boundary(data, at)
        (folder / rel).write_bytes(damaged)
        kept = whole if at == "flip" else whole[:-1]  # a flipped newline: the record verifies
        thread: Any = {"configurable": {"thread_id": sid, "tenant_id": "default"}}
        if rel.endswith("checkpoints.jsonl"):
            served = JsonlCheckpointSaver(copy).get_tuple(thread)
            assert served is not None and served.checkpoint["id"] == _newest_checkpoint(kept), rel
        done = repair_session(folder)
        assert [r.path for r in done if r.path.name == Path(rel).name] == ([folder / rel] if at != "0" else [])
        assert all(r.health in (Health.OK, Health.STALE) for r in verify_session(folder) if r.name == rel), rel
        assert records.read_records(folder / rel) == kept, rel
        if at == "flip":
            assert (folder / rel).read_bytes() == data, rel
        elif at != "0":
            assert broken_file(folder / rel).read_bytes() == damaged[_last(data) :], rel
        if rel.endswith("checkpoints.jsonl"):
            served = JsonlCheckpointSaver(copy).get_tuple(thread)
            assert served is not None and served.checkpoint["id"] == _newest_checkpoint(kept), rel
        shutil.rmtree(copy)


@pytest.mark.parametrize("status", STATUSES)
def test_the_repair_rebuilds_damaged_documents(
    sessions: dict[str, tuple[Path, str]], status: str, tmp_path: Path
) -> None:
    """A damaged session.json is moved aside (its owner rebuilds it); a damaged fence.json is
    rewritten at or above every fencing token the event log carries, so no old holder writes again."""
    base, sid = sessions[status]
    copy = tmp_path / "copy"
    shutil.copytree(base, copy, symlinks=True)
    folder = copy / "tenants/default/sessions" / sid
    highest = FencingGuard(folder).highest()
    assert highest is not None
    for name in ("session.json", "fence.json"):
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) // 2])
    said = {r.path.name: r for r in repair_session(folder)}
    assert set(said) >= {"session.json", "fence.json"}
    assert not (folder / "session.json").exists() and broken_file(folder / "session.json").exists()
    rebuilt = FencingGuard(folder).highest()
    assert rebuilt is not None and rebuilt >= highest
    assert all(not r.health.blocks for r in verify_session(folder))
