"""FencingGuard: writes with a lease token lower than the highest seen are refused."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from checkpointing.exceptions import CorruptRecordError, InvalidIdError, StaleFencingTokenError
from checkpointing.fencing import FencingGuard

REPO = Path(__file__).resolve().parents[2]


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    """Start `code` in a fresh interpreter with stdin/stdout pipes."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


CHECK = """
    import sys
    from checkpointing.exceptions import StaleFencingTokenError
    from checkpointing.fencing import FencingGuard
    try:
        FencingGuard(sys.argv[1]).check_and_raise(int(sys.argv[2]))
        print("ok", flush=True)
    except StaleFencingTokenError:
        print("stale", flush=True)
"""


def test_no_token_means_no_guard(tmp_path: Path) -> None:
    """Token None (no lease in use) is always let through and leaves no fence file."""
    guard = FencingGuard(tmp_path / "s")
    guard.check_and_raise(None)
    with guard.fenced(None):
        pass
    assert guard.highest() is None
    assert not (tmp_path / "s" / "fence.json").exists()


def test_lower_token_is_refused_equal_and_higher_pass(tmp_path: Path) -> None:
    """After token 3 is seen, 3 and 4 pass and 2 is refused with a message saying what happened."""
    guard = FencingGuard(tmp_path)
    guard.check_and_raise(3)
    guard.check_and_raise(3)
    guard.check_and_raise(4)
    with pytest.raises(StaleFencingTokenError) as info:
        guard.check_and_raise(2)
    assert "token 2 refused" in str(info.value) and "4" in str(info.value)
    assert FencingGuard(tmp_path).highest() == 4


def test_session_guard_validates_ids(tmp_path: Path) -> None:
    """for_session rejects ids that would escape the session directory."""
    with pytest.raises(InvalidIdError):
        FencingGuard.for_session(tmp_path, "acme", "../other")


def test_unreadable_fence_file_refuses_writes(tmp_path: Path) -> None:
    """A damaged fence.json blocks writes instead of silently dropping the fence."""
    (tmp_path / "fence.json").write_text("{not json")
    with pytest.raises(CorruptRecordError, match=r"fence\.json:1: .*the fence is unreadable"):
        FencingGuard(tmp_path).check_and_raise(5)


@pytest.mark.integration
def test_stale_holder_is_refused_after_another_process_raised_the_token(tmp_path: Path) -> None:
    """A process that cached token 1 is refused once another process checked token 2."""
    old = FencingGuard(tmp_path)
    old.check_and_raise(1)
    old.check_and_raise(1)
    proc = spawn(CHECK, str(tmp_path), "2")
    out, err = proc.communicate(timeout=60)
    assert out.strip() == "ok", err
    with pytest.raises(StaleFencingTokenError):
        old.check_and_raise(1)
    with pytest.raises(StaleFencingTokenError), old.fenced(1):
        pass
    proc = spawn(CHECK, str(tmp_path), "1")
    assert proc.communicate(timeout=60)[0].strip() == "stale"


@pytest.mark.integration
def test_concurrent_processes_end_with_the_highest_token(tmp_path: Path) -> None:
    """Eight processes checking tokens 1..8 at once leave 8 as the highest; 8 is never refused."""
    tokens = [5, 2, 8, 1, 7, 3, 6, 4]
    procs = {t: spawn(CHECK, str(tmp_path), str(t)) for t in tokens}
    results = {t: p.communicate(timeout=60)[0].strip() for t, p in procs.items()}
    assert results[8] == "ok"
    assert set(results.values()) <= {"ok", "stale"}
    assert FencingGuard(tmp_path).highest() == 8
    with pytest.raises(StaleFencingTokenError):
        FencingGuard(tmp_path).check_and_raise(7)


@pytest.mark.integration
def test_new_owner_waits_for_an_in_flight_fenced_write(tmp_path: Path) -> None:
    """A new owner's first check returns only after the old owner's fenced write finished."""
    done = tmp_path / "old-write-done"
    code = """
        import sys
        from pathlib import Path
        from checkpointing.fencing import FencingGuard
        guard = FencingGuard(sys.argv[1])
        with guard.fenced(1):
            print("writing", flush=True)
            sys.stdin.readline()
            Path(sys.argv[2]).write_text("done")
    """
    FencingGuard(tmp_path).check_and_raise(1)
    old = spawn(code, str(tmp_path), str(done))
    assert old.stdout is not None and old.stdin is not None
    assert old.stdout.readline().strip() == "writing"
    seen: list[bool] = []

    def new_owner_check() -> None:
        FencingGuard(tmp_path).check_and_raise(2)
        seen.append(done.exists())

    new_owner = threading.Thread(target=new_owner_check)
    new_owner.start()
    old.stdin.write("go\n")
    old.stdin.flush()
    old.communicate(timeout=60)
    new_owner.join(timeout=60)
    assert seen == [True]
