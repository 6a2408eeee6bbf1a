"""A damaged last record never strands a session: the installed `agentrt`, as a user meets it.

The demo session is made once (`agentrt run --approve-all ...`: COMPLETED) and copied per case;
one file of its folder gets its LAST record damaged at a boundary offset (0 = the whole record
gone and the file ending cleanly, 1, the middle, len-2, len-1 = only the newline missing, or its
final newline flipped). Each case must end in one of two ways:

- continues: the next command (`run --session ID --approve-all again`; for a PAUSED session
  `resume ID --approve`, for a killed one `resume ID`) succeeds;
- refused: that command exits non-zero with ONE `agentrt: error:` line naming the file and
  `agentrt doctor ID --repair`, `agentrt doctor ID` exits 1 with a FAIL naming that repair, and
  after `agentrt doctor ID --repair` the command succeeds.

Either way `agentrt show ID` then lists every entry it listed before the damage (minus at most
the torn one, when the event log was the damaged file), and no tool call whose COMPLETED journal
record survived the damage ran again (the journal holds one completion per call).

In CI the COMPLETED session runs a chosen sample of offsets per kind of file (the in-process sweep,
tests/unit/checkpointing/test_torn_last_record.py, tries every byte). `AGENTRT_TORN_ALL=1` runs every boundary
offset of every kind for all three statuses (COMPLETED, PAUSED at its approval, RUNNING killed by
a crash after its third tool call):

    AGENTRT_TORN_ALL=1 python -m pytest -q tests/cli/test_torn_tail_cli.py
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from checkpointing.records import read_records
from tests.cli.console import agentrt
from tests.support.drills import switch

TEXT = "Summarise the 2026 sales by region"
ALL = switch("AGENTRT_TORN_ALL")
STATUSES = ("COMPLETED", "PAUSED", "RUNNING") if ALL else ("COMPLETED",)
OFFSETS = ("0", "1", "mid", "len-2", "len-1", "flip")
# The CI sample: every offset where the headline bug lived, a spread elsewhere (every file of a
# kind goes through the same rule, which the in-process sweep checks at every byte). A document
# replaced whole is refused whatever its damage: one offset each (a flipped last byte, a missing newline).
SAMPLE = {
    "checkpoints.jsonl": OFFSETS,
    "events.jsonl": ("0", "flip"),
    "journal.jsonl": ("1", "len-1"),
    "session.json": ("flip",),
    "fence.json": ("len-1",),
    "lease.token": ("mid",),
    "events.jsonl.idx": ("mid",),
    "checkpoints.jsonl.idx": ("len-1",),
}
REFUSED = ("session.json", "fence.json")
"""Documents replaced whole (never torn by a crash): damage refuses until `doctor --repair`."""


def _make(where: Path, status: str) -> str:
    where.mkdir()
    extra = {"AGENTRT_CRASH_AT": "after_tool_execute:3"} if status == "RUNNING" else None
    args = ["run", TEXT] if status == "PAUSED" else ["run", "--approve-all", TEXT]
    ran = agentrt(*args, cwd=where, extra_env=extra)
    assert ran.code == (137 if status == "RUNNING" else 0), ran.err
    (sid,) = [p.name for p in (where / ".agentrt/tenants/default/sessions").iterdir()]
    return sid


def _entries(cwd: Path, sid: str) -> list[str]:
    ran = agentrt("show", sid, "--json", "--last", "100000", cwd=cwd)
    assert ran.code == 0, ran.err
    return [str(e["id"]) for e in json.loads(ran.out)["entries"]]


def _damage(path: Path, at: str) -> None:
    data = path.read_bytes()
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    n = len(data) - start
    if at == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0x01]))
    else:
        path.write_bytes(data[: start + {"0": 0, "1": 1, "mid": n // 2, "len-2": n - 2, "len-1": n - 1}[at]])


def _completions(folder: Path) -> Counter[tuple[str, str]]:
    return Counter(
        (str(r["run_id"]), str(r["tool_call_id"]))
        for r in read_records(folder / "journal.jsonl")
        if r.get("kind") == "completed"
    )


def _go_on(status: str, sid: str) -> list[str]:
    if status == "COMPLETED":
        return ["run", "--session", sid, "--approve-all", "again"]
    return ["resume", sid, "--approve"] if status == "PAUSED" else ["resume", sid]


def _case(base: Path, sid: str, status: str, before: list[str], rel: str, at: str, work: Path) -> None:
    case = f"{status} {rel} at {at}"
    cwd = work / f"{status}-{rel.replace('/', '_')}-{at}"
    shutil.copytree(base, cwd, symlinks=True)
    folder = cwd / ".agentrt/tenants/default/sessions" / sid
    _damage(folder / rel, at)
    done_before = _completions(folder)  # what survived the damage (a read skips a torn tail)
    go_on = _go_on(status, sid)
    ran = agentrt(*go_on, cwd=cwd)
    name = Path(rel).name
    if name in REFUSED:
        assert ran.code != 0, f"{case}: went on with a damaged {name}"
        line = ran.error_line()
        repair = f"agentrt doctor {sid} --repair"
        assert name in line and repair in line, f"{case}: {line}"
        doctor = agentrt("doctor", sid, cwd=cwd)
        fails = [ln for ln in doctor.out.splitlines() if ln.startswith("[FAIL]")]
        assert doctor.code == 1 and fails and repair in doctor.out, f"{case}: doctor said\n{doctor.out}"
        fixed = agentrt("doctor", sid, "--repair", cwd=cwd)
        assert fixed.code == 0 and name in fixed.out, f"{case}: {fixed.out}{fixed.err}"
        ran = agentrt(*go_on, cwd=cwd)
    assert ran.code == 0, f"{case}: {' '.join(go_on)} exited {ran.code}: {ran.err}"
    after = _entries(cwd, sid)
    lost = [e for e in before if e not in after]
    assert len(lost) <= (1 if name == "events.jsonl" else 0), f"{case}: show lost {lost}"
    done_after = _completions(folder)
    assert all(n == 1 for n in done_after.values()), f"{case}: a tool call completed twice: {done_after}"
    assert set(done_before) <= set(done_after), case
    shutil.rmtree(cwd)


def _kinds(folder: Path) -> dict[str, str]:
    """Session-relative path of each file a case damages, by its kind's name."""
    out: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and path.stat().st_size and not rel.startswith("workspace/") and not rel.endswith(".lock"):
            out[path.name] = rel
    return out


@pytest.mark.parametrize("status", STATUSES)
def test_a_damaged_last_record_goes_on_or_names_its_repair(tmp_path: Path, status: str) -> None:
    """Every case continues, or is refused with the repair named, and the repair works."""
    base = tmp_path / "base"
    sid = _make(base, status)
    before = _entries(base, sid)
    kinds = _kinds(base / ".agentrt/tenants/default/sessions" / sid)
    assert {"checkpoints.jsonl", "events.jsonl", "journal.jsonl", "session.json", "fence.json"} <= set(kinds)
    cases = [(kinds[k], at) for k in kinds for at in (OFFSETS if ALL else SAMPLE.get(k, ()))]
    assert len(cases) >= (len(kinds) * len(OFFSETS) if ALL else sum(map(len, SAMPLE.values())))
    with ThreadPoolExecutor(max_workers=2) as pool:  # each case has its own copy of the folder
        for done in [pool.submit(_case, base, sid, status, before, rel, at, tmp_path) for rel, at in cases]:
            done.result()
