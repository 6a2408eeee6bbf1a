"""The demo's sandbox room survives crashes byte for byte.

`agentrt run --approve-all "Summarise the 2026 sales by region"` on the embedded default config
writes `report.md` (write_file, idempotent) and publishes it to `outbox/team-report.md`
(publish_report, unsafe, approved). A resumed run must leave exactly the room an uncrashed run
leaves: same paths, bytes and modes, no temp file, and no call left "outcome unknown".

- Kills at the exact instants that used to change the room, through the installed console script:
  inside a room write (temp file written, not renamed), after publish_report's INTENT, and after its
  write but before its COMPLETED record.
- A random drill: SIGKILLs at seeded random instants of the demo run, each session resumed until
  COMPLETED, every room compared with the uncrashed run's. `AGENTRT_DEMO_KILLS` sets the number of
  kills (default 25 for CI, ~15 s; the full drill is `AGENTRT_DEMO_KILLS=100`). The processes are
  forks of a server with the runtime imported (tests/support/zygote.py), so the kills land inside
  the run, not in Python's start-up.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.console import agentrt
from tests.support.crash import SIGKILL_CODE, room_diff, room_files, unfinished_unsafe_calls
from tests.support.drills import size
from tests.support.zygote import Outcome, Zygote

TEXT = "Summarise the 2026 sales by region"
SEED = 20261226
KILLS = size("AGENTRT_DEMO_KILLS", sample=25, full=100)
MAX_ATTEMPTS = 8 * KILLS + 50  # the loop stops by itself even if the runs never finish


def _session_dir(cwd: Path, sid: str) -> Path:
    return cwd / ".agentrt" / "tenants" / "default" / "sessions" / sid


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """The answer and the room of an uncrashed demo run."""
    cwd = tmp_path_factory.mktemp("reference")
    ran = agentrt("run", "--approve-all", "--new-session", "ref", "--json", TEXT, cwd=cwd)
    assert ran.code == 0, ran.err
    room = room_files(_session_dir(cwd, "ref") / "workspace")
    assert set(room) == {"report.md", "outbox", "outbox/team-report.md"}, room
    return json.loads(ran.out)["answer"], room


def _journal_kinds(session: Path, call_id: str) -> list[str]:
    from checkpointing.layout import journal_file
    from checkpointing.records import read_records

    return [r["kind"] for r in read_records(journal_file(session)) if r.get("tool_call_id") == call_id]


PUBLISH = "call_6_1"  # the demo script's publish_report call
# (crash spec, what the room must show right after the crash). Counts are arrivals in the demo's
# one process: room writes are report.md then the publication; journaled tools are list_datasets,
# query_dataset x2, calculator, write_file, publish_report (two journal appends each).
CRASHES = {
    "report write cut before its rename": ("mid_room_write:1", "temp"),
    "publication cut before its rename": ("mid_room_write:2", "temp"),
    "publication INTENT recorded, nothing written": ("after_journal_append:11", "unpublished"),
    "publication written, no COMPLETED record": ("after_tool_execute:6", "published"),
}


@pytest.mark.parametrize("case", list(CRASHES))
def test_kill_at_a_room_write_resumes_to_the_same_room(
    tmp_path: Path, reference: tuple[str, dict[str, Any]], case: str
) -> None:
    """A kill inside a room write or around publish_report: resume ends with the uncrashed room."""
    spec, seen = CRASHES[case]
    answer, ref_room = reference
    crash = {"AGENTRT_CRASH_AT": spec}
    crashed = agentrt("run", "--approve-all", "--new-session", "s1", "--json", TEXT, cwd=tmp_path, extra_env=crash)
    assert crashed.code == SIGKILL_CODE, crashed.err
    session = _session_dir(tmp_path, "s1")
    before = room_files(session / "workspace")
    if seen == "temp":
        assert any(Path(p).name.startswith(".agentrt-tmp-") for p in before), before
    else:
        assert ("outbox/team-report.md" in before) is (seen == "published"), before
        assert _journal_kinds(session, PUBLISH) == ["intent"]

    resumed = agentrt("resume", "s1", "--json", cwd=tmp_path)
    if resumed.code == 0 and json.loads(resumed.out)["status"] == "PAUSED":  # killed before the approval
        resumed = agentrt("resume", "s1", "--approve", "--json", cwd=tmp_path)

    assert resumed.code == 0, resumed.err
    result = json.loads(resumed.out)
    assert (result["status"], result["answer"]) == ("COMPLETED", answer)
    room = room_files(session / "workspace")
    assert room == ref_room, room_diff(room, ref_room)
    assert _journal_kinds(session, PUBLISH)[-1] == "completed"
    assert _journal_kinds(session, PUBLISH).count("completed") == 1
    shown = agentrt("show", "s1", cwd=tmp_path)
    assert "outcome unknown" not in shown.out.lower() and "-> error" not in shown.out, shown.out


def _attempt(z: Zygote, argv: list[str], cwd: Path, env: dict[str, str], delay: float | None) -> Outcome:
    """Start one process in `cwd`, SIGKILL it after `delay` (None: never) unless it ended first."""
    pid = z.spawn(argv, env, cwd)
    if delay is not None:
        time.sleep(delay)  # the random instant itself, not a wait for a condition
        z.kill(pid)
    return z.wait()


def _next_argv(sid: str, argv: list[str], out: Outcome) -> list[str] | None:
    """The command that carries a session on after `out` (None: it finished)."""
    if out.code == -signal.SIGKILL:
        return ["resume", sid, "--json"]
    if argv[0] == "resume" and out.code in (3, 4) and ("nothing to resume" in out.stderr or "not found" in out.stderr):
        # killed before the turn's first checkpoint (or before the session existed): run it again
        which = "--new-session" if "not found" in out.stderr else "--session"
        return ["run", "--approve-all", which, sid, "--json", TEXT]
    waiting = out.code == 4 and "waiting for a human decision" in out.stderr
    if waiting or (out.code == 0 and out.json()["status"] == "PAUSED"):
        return ["resume", sid, "--approve", "--json"]  # killed before --approve-all answered
    return None


def test_random_kills_of_the_demo_leave_the_uncrashed_room(
    tmp_path: Path, reference: tuple[str, dict[str, Any]]
) -> None:
    """SIGKILLs at random instants of the demo: every session resumes to the uncrashed answer and room."""
    answer, ref_room = reference
    rng = random.Random(SEED)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTRT_", "PYTEST_"))}
    cwd = tmp_path / "drill"
    cwd.mkdir()
    with Zygote(tmp_path) as z:
        for sid in ("warm-up", "timing"):  # the first run in a folder also creates the session database
            started = time.monotonic()
            timed = _attempt(z, ["run", "--approve-all", "--new-session", sid, "--json", TEXT], cwd, env, None)
            assert timed.code == 0, timed.stderr
        run_s = time.monotonic() - started  # kills spread over one uncrashed run's length (not asserted)
        kills = attempts = 0
        sessions: list[dict[str, Any]] = []
        while kills < KILLS and attempts < MAX_ATTEMPTS:
            sid = f"rnd-{len(sessions)}"
            figures: dict[str, Any] = {"sid": sid, "kills": 0, "events_at_kill": []}
            argv: list[str] | None = ["run", "--approve-all", "--new-session", sid, "--json", TEXT]
            out = timed
            while argv is not None:
                attempts += 1
                delay = rng.uniform(0.0, run_s) if kills < KILLS and attempts < MAX_ATTEMPTS else None
                out = _attempt(z, argv, cwd, env, delay)
                if out.code == -signal.SIGKILL:
                    kills += 1
                    figures["kills"] += 1
                    figures["events_at_kill"].append(_event_count(_session_dir(cwd, sid)))
                argv = _next_argv(sid, argv, out)
            assert out.code == 0, f"{sid}: ended with {out.code}: {out.stderr[-1500:]}"
            session = _session_dir(cwd, sid)
            assert (out.json()["status"], out.json()["answer"]) == ("COMPLETED", answer), sid
            room = room_files(session / "workspace")
            assert room == ref_room, f"{sid} {figures}: {room_diff(room, ref_room)}"
            assert unfinished_unsafe_calls(session) == {}, f"{sid} {figures}: a call was left outcome unknown"
            sessions.append(figures)
    print(f"\ndemo drill: {kills} kills, {len(sessions)} sessions, {attempts} processes, every room identical")
    print(json.dumps([s for s in sessions if s["kills"]]))
    assert kills == KILLS


def _event_count(session: Path) -> int:
    """Lines of the session's event log when the process was killed (to name the instant)."""
    log = session / "events.jsonl"
    return log.read_bytes().count(b"\n") if log.exists() else 0
