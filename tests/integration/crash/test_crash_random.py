"""Random SIGKILL drill: kills at seeded random instants of the ~30-step drill run, all resumed.

Each session's `agentrt run` is SIGKILLed after a random delay, then `agentrt resume` is started
and killed again at random until one attempt finishes by itself; then the next session starts,
until KILLS processes were really killed mid-run (40 by default; 100 with `AGENTRT_FULL_DRILLS=1`,
any number with `AGENTRT_RANDOM_KILLS=N`). Every session must end with the reference
result and leave the reference's sandbox room byte for byte (paths, contents, modes: no temp file,
no edit lost or made twice), and the side-effect counter must show each unsafe call at most once. The processes are
forks of a server that has the runtime imported (tests/support/zygote.py), so the random instant
falls inside the run rather than inside Python's start-up; the kill is a real SIGKILL.

    AGENTRT_RANDOM_KILLS=100 python -m pytest -q tests/integration/crash/test_crash_random.py
"""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path
from typing import Any

from tests.support.crash import (
    DRILL_TEXT,
    child_env,
    counter_lines,
    expected_after_unknown,
    make_drill_config,
    read_state,
    result_view,
    room_diff,
    room_files,
    session_path,
    unfinished_unsafe_calls,
)
from tests.support.drills import size
from tests.support.zygote import Outcome, Zygote

SEED = 20261202
KILLS = size("AGENTRT_RANDOM_KILLS", sample=40, full=100)
MAX_ATTEMPTS = 6 * KILLS  # the loop stops by itself even if the runs never finish
DELAY_S = (0.0, 0.45)  # an uncrashed drill run takes about 0.45 s in a fork on this machine
LABELS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def _attempt(z: Zygote, argv: list[str], env: dict[str, str], delay: float | None) -> tuple[Outcome, bool]:
    """Start one process, SIGKILL it after `delay` (None: never) unless it ended; (outcome, killed)."""
    pid = z.spawn(argv, env)
    if delay is not None:
        time.sleep(delay)  # the random instant itself, not a wait for a condition
        z.kill(pid)
    out = z.wait()
    return out, out.code == -signal.SIGKILL


def test_random_kills_all_resume_to_reference(tmp_path: Path) -> None:
    """KILLS SIGKILLs at random instants: every session resumes to the reference result, no unsafe call twice."""
    rng = random.Random(SEED)
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    with Zygote(tmp_path) as z:
        ref_cfg = make_drill_config(ref_dir)
        ref_argv = ["run", "--config", str(ref_cfg), "--new-session", "ref", "--json", DRILL_TEXT]
        ref = z.run(ref_argv, child_env(ref_dir / "c"))
        assert ref.code == 0, ref.stderr
        ref_result, ref_state = result_view(ref.json()), read_state(ref_cfg, "ref")
        ref_room = room_files(session_path(ref_cfg, "ref") / "workspace")
        assert "notes.txt" in ref_room, ref_room

        cfg = make_drill_config(tmp_path)
        kills = attempts = checked = 0
        sessions: list[dict[str, Any]] = []
        while kills < KILLS and attempts < MAX_ATTEMPTS:
            sid = f"rnd-{len(sessions)}"
            counter = tmp_path / f"counter-{sid}"
            env = child_env(counter)
            figures: dict[str, Any] = {"sid": sid, "kills": 0, "resumes": 0, "reruns": 0}
            argv = ["run", "--config", str(cfg), "--new-session", sid, "--json", DRILL_TEXT]
            while True:
                attempts += 1
                budget_left = kills < KILLS and attempts < MAX_ATTEMPTS
                delay = rng.uniform(*DELAY_S) if budget_left else None
                out, killed = _attempt(z, argv, env, delay)
                if killed:
                    kills += 1
                    figures["kills"] += 1
                    argv = ["resume", sid, "--config", str(cfg), "--json"]
                    continue
                if out.code in (3, 4) and argv[0] == "resume" and _nothing_to_resume(out.stderr):
                    # killed before its first checkpoint: the turn never started, so run it again
                    figures["reruns"] += 1
                    # killed before the session was created (resume: not found), or after (no checkpoint)
                    which = "--new-session" if "not found" in out.stderr else "--session"
                    argv = ["run", "--config", str(cfg), which, sid, "--json", DRILL_TEXT]
                    continue
                assert out.code == 0, f"{sid}: {argv[0]} ended with {out.code}: {out.stderr[-1500:]}"
                figures["resumes"] += argv[0] == "resume"
                break
            sessions.append(figures)
            figures["unknown"] = _check_session(cfg, sid, counter, out, ref_result, ref_state)
            room = room_files(session_path(cfg, sid) / "workspace")
            assert room == ref_room, f"{sid} {figures}: {room_diff(room, ref_room)}"
            checked += 1
    unknown = sum(s["unknown"] for s in sessions)
    print(f"\nrandom drill: {kills} kills, {len(sessions)} sessions, {attempts} processes, {unknown} outcome-unknown")
    print(json.dumps(sessions))
    assert kills == KILLS
    assert len(sessions) == checked


def _nothing_to_resume(stderr: str) -> bool:
    return "nothing to resume" in stderr or "not found" in stderr


def _check_session(
    cfg: Path, sid: str, counter: Path, out: Outcome, ref_result: dict[str, Any], ref_state: dict[str, Any]
) -> int:
    """Check one finished session against the reference; returns how many calls ended "outcome unknown"."""
    assert result_view(out.json()) == {**ref_result, "session_id": sid}
    bumped = counter_lines(counter)
    assert len(bumped) == len(set(bumped)), f"{sid}: an unsafe call ran twice: {bumped}"
    state = read_state(cfg, sid)
    unknown = unfinished_unsafe_calls(session_path(cfg, sid))
    if unknown:
        assert state == expected_after_unknown(ref_state, state, unknown, bumped), sid
    else:
        assert state == ref_state, sid
        assert bumped == LABELS, sid
    return len(unknown)
