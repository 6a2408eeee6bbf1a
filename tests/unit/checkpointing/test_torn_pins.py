"""A damaged `pins.json` (the checkpoints retention must keep: a forked session's fork points) is
refused by name with its repair, and the repair pins the same checkpoints again: every byte offset.

One demo session is run to COMPLETED and forked with the installed `agentrt`, once per module.
Each truncation of the last (only) record of its `pins.json`, and each bit flip of its final
newline, is checked in memory: the verify API calls it a damaged document it can repair; the
saver refuses to pin with an error naming the file, and the user reads `agentrt doctor ID --repair`.
At the boundary offsets the storage layer's repair runs for real on a copy: the damaged bytes move
to `pins.json.broken`, and pinning the fork points the event log records gives back the same pins.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.core.errors import as_agentrt_error
from checkpointing import records
from checkpointing.exceptions import CheckpointingError
from checkpointing.layout import broken_file
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.verify import FileKind, Health, repair_session, verify_bytes, verify_session
from tests.cli.console import agentrt

TEXT = "Summarise the 2026 sales by region"
BOUNDARY = ("0", "1", "mid", "len-2", "len-1", "flip")


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(base_dir, session id) of a COMPLETED demo session forked at one of its node ends."""
    where = tmp_path_factory.mktemp("pins")
    ran = agentrt("run", "--approve-all", TEXT, cwd=where)
    assert ran.code == 0, ran.err
    base = where / ".agentrt"
    (sid,) = [p.name for p in (base / "tenants/default/sessions").iterdir()]
    shown = agentrt("show", sid, "--json", "--last", "100000", cwd=where)
    entry = [e["id"] for e in json.loads(shown.out)["entries"] if e["type"] == "node_end"][3]
    fork = agentrt("fork", sid, "--from", entry, cwd=where)
    assert fork.code == 0, fork.err
    assert (base / "tenants/default/sessions" / sid / "pins.json").exists()
    return base, sid


def _damages(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Every truncation inside the last record, and each one-bit flip of its final newline."""
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    for k in range(len(data) - start):
        yield f"cut+{k}", data[: start + k]
    for bit in range(8):
        yield f"flip{bit}", data[:-1] + bytes([data[-1] ^ (1 << bit)])


def _boundary(data: bytes, at: str) -> bytes:
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    n = len(data) - start
    if at == "flip":
        return data[:-1] + bytes([data[-1] ^ 0x01])
    return data[: start + {"0": 0, "1": 1, "mid": n // 2, "len-2": n - 2, "len-1": n - 1}[at]]


def _fork_points(folder: Path) -> set[tuple[str, str]]:
    """The fork points the event log records (its `branch_created` entries), as pins."""
    return {
        ("", str(rec["payload"]["checkpoint_id"]))
        for rec in records.read_records(folder / "events.jsonl")
        if rec.get("type") == "branch_created"
    }


def _config(sid: str, checkpoint_id: str) -> Any:
    return {"configurable": {"thread_id": sid, "tenant_id": "default", "checkpoint_id": checkpoint_id}}


def test_every_offset_of_pins_json_is_refused_with_its_repair(forked: tuple[Path, str], tmp_path: Path) -> None:
    """No damage of pins.json is read as other pins: pinning refuses, naming the file and the repair."""
    base, sid = forked
    data = (base / "tenants/default/sessions" / sid / "pins.json").read_bytes()
    copy = tmp_path / "copy"
    shutil.copytree(base, copy, symlinks=True)
    folder = copy / "tenants/default/sessions" / sid
    (cp,) = _fork_points(folder)
    cases = 0
    for label, damaged in _damages(data):
        case = f"pins.json {label}"
        report = verify_bytes(folder, "pins.json", damaged)
        assert report.kind is FileKind.DOCUMENT and report.health is Health.CORRUPT, case
        assert report.repairable, case
        (folder / "pins.json").write_bytes(damaged)
        with pytest.raises(CheckpointingError, match=r"pins\.json") as refused:
            JsonlCheckpointSaver(copy).pin(_config(sid, cp))
        said = as_agentrt_error(refused.value)
        assert said is not None and said.exit_code == 8, case
        assert f"agentrt doctor {sid} --repair" in str(said) and "pins.json" in str(said), case
        assert (folder / "pins.json").read_bytes() == damaged, f"{case}: a refusal changed the file"
        cases += 1
    assert cases == len(data) + 8


@pytest.mark.parametrize("at", BOUNDARY)
def test_the_repair_gives_back_the_same_pins(forked: tuple[Path, str], tmp_path: Path, at: str) -> None:
    """The repair moves the damaged bytes to pins.json.broken; pinning the fork points the event
    log records gives back exactly the pins the fork wrote."""
    base, sid = forked
    copy = tmp_path / "copy"
    shutil.copytree(base, copy, symlinks=True)
    folder = copy / "tenants/default/sessions" / sid
    before = records.read_records(folder / "pins.json")
    data = (folder / "pins.json").read_bytes()
    damaged = _boundary(data, at)
    (folder / "pins.json").write_bytes(damaged)
    done = [r for r in repair_session(folder) if r.path.name == "pins.json"]
    assert len(done) == 1 and done[0].kept == broken_file(folder / "pins.json")
    assert broken_file(folder / "pins.json").read_bytes() == damaged
    assert not (folder / "pins.json").exists()
    saver = JsonlCheckpointSaver(copy)
    for _, cp in sorted(_fork_points(folder)):
        saver.pin(_config(sid, cp))
    assert records.read_records(folder / "pins.json") == before
    assert all(not r.health.blocks for r in verify_session(folder))
