"""A damaged `pins.json` of a forked session, as a user meets it with the installed `agentrt`.

The demo session is run to COMPLETED and forked once; per case a copy of it gets its `pins.json`
(the checkpoints retention must keep: the fork point) damaged at a boundary offset of its record
(0 = the whole record gone, 1, the middle, len-2, len-1 = only the newline missing, or its final
newline flipped). A second fork refuses with ONE `agentrt: error:` line naming the file and
`agentrt doctor ID --repair`; `agentrt doctor ID` exits 1 with a FAIL naming that command; after
`agentrt doctor ID --repair` the file pins the fork point again, the fork goes through, the
session runs on, and `agentrt show ID` still lists every entry it listed before the damage.

By default four offsets run, one of each way a record ends damaged (0: gone whole, mid: cut
inside, len-1: only the newline missing, flip: a wrong last byte); `AGENTRT_TORN_ALL=1` (or
`AGENTRT_FULL_DRILLS=1`) runs all six:

    AGENTRT_TORN_ALL=1 python -m pytest -q tests/cli/test_torn_pins_cli.py
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from checkpointing.records import read_records
from tests.cli.console import agentrt
from tests.support.drills import switch

TEXT = "Summarise the 2026 sales by region"
OFFSETS = ("0", "1", "mid", "len-2", "len-1", "flip")
SAMPLE = ("0", "mid", "len-1", "flip")
CHOSEN = OFFSETS if switch("AGENTRT_TORN_ALL") else SAMPLE


def _entries(cwd: Path, sid: str) -> list[dict[str, str]]:
    ran = agentrt("show", sid, "--json", "--last", "100000", cwd=cwd)
    assert ran.code == 0, ran.err
    return [{"id": str(e["id"]), "type": str(e["type"])} for e in json.loads(ran.out)["entries"]]


def _damage(path: Path, at: str) -> None:
    data = path.read_bytes()
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    n = len(data) - start
    if at == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0x01]))
    else:
        path.write_bytes(data[: start + {"0": 0, "1": 1, "mid": n // 2, "len-2": n - 2, "len-1": n - 1}[at]])


def _case(base: Path, sid: str, before: list[str], entry: str, at: str, work: Path) -> None:
    case = f"pins.json at {at}"
    cwd = work / f"pins-{at}"
    shutil.copytree(base, cwd, symlinks=True)
    pins = cwd / ".agentrt/tenants/default/sessions" / sid / "pins.json"
    pinned = read_records(pins)
    _damage(pins, at)
    repair = f"agentrt doctor {sid} --repair"
    refused = agentrt("fork", sid, "--from", entry, cwd=cwd)
    assert refused.code == 8, f"{case}: fork exited {refused.code}: {refused.err}"
    line = refused.error_line()
    assert "pins.json" in line and repair in line, f"{case}: {line}"
    doctor = agentrt("doctor", sid, cwd=cwd)
    fails = [ln for ln in doctor.out.splitlines() if ln.startswith("[FAIL]")]
    assert doctor.code == 1 and any("pins.json" in ln for ln in fails), f"{case}: doctor said\n{doctor.out}"
    assert repair in doctor.out, f"{case}: doctor said\n{doctor.out}"
    fixed = agentrt("doctor", sid, "--repair", cwd=cwd)
    assert fixed.code == 0 and "pins.json" in fixed.out, f"{case}: {fixed.out}{fixed.err}"
    assert read_records(pins) == pinned, f"{case}: the fork point is not pinned again"
    forked = agentrt("fork", sid, "--from", entry, cwd=cwd)
    assert forked.code == 0, f"{case}: fork after the repair exited {forked.code}: {forked.err}"
    ran = agentrt("run", "--session", sid, "--approve-all", "again", cwd=cwd)
    assert ran.code == 0, f"{case}: the run after the repair exited {ran.code}: {ran.err}"
    after = [e["id"] for e in _entries(cwd, sid)]
    assert [e for e in before if e not in after] == [], f"{case}: show lost entries"
    shutil.rmtree(cwd)


def test_a_damaged_pins_json_names_its_repair_and_the_repair_works(tmp_path: Path) -> None:
    """Each chosen boundary offset (see the module's docstring): refused by name, FAIL naming the
    repair, repaired, and the session goes on."""
    base = tmp_path / "base"
    base.mkdir()
    made = agentrt("run", "--approve-all", TEXT, cwd=base)
    assert made.code == 0, made.err
    (sid,) = [p.name for p in (base / ".agentrt/tenants/default/sessions").iterdir()]
    ends = [e["id"] for e in _entries(base, sid) if e["type"] == "node_end"]
    forked = agentrt("fork", sid, "--from", ends[3], cwd=base)
    assert forked.code == 0, forked.err
    before = [e["id"] for e in _entries(base, sid)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # each case has its own copy of the folder
        for done in [pool.submit(_case, base, sid, before, ends[5], at, tmp_path) for at in CHOSEN]:
            done.result()
