"""Crash-drill fault injection: AGENTRT_CRASH_AT and the crash points."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.core import faults
from agent.core.errors import ConfigError
from checkpointing import record_log
from checkpointing.records import read_records
from checkpointing.torn_tail import cut_torn_tail

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _clean_faults() -> Iterator[None]:
    """Every test starts and ends with fault injection disarmed."""
    faults.reset()
    yield
    faults.reset()


def run_py(code: str, crash_at: str | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter with AGENTRT_CRASH_AT set (or unset)."""
    env = {k: v for k, v in os.environ.items() if k != faults.ENV_VAR}
    env["PYTHONPATH"] = str(REPO)
    if crash_at is not None:
        env[faults.ENV_VAR] = crash_at
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_parse_accepts_lists_and_default_count() -> None:
    """A comma-separated spec arms several points; a point without :n means its first arrival."""
    spec = faults.parse_crash_spec("after_tool_execute:2, mid_event_write ,after_tool_execute:5")
    assert spec == {"after_tool_execute": frozenset({2, 5}), "mid_event_write": frozenset({1})}


@pytest.mark.parametrize("spec", ["no_such_point:1", "after_tool_execute:0", "after_tool_execute:x"])
def test_bad_spec_is_a_config_error_listing_valid_points(spec: str) -> None:
    """An unknown point or a bad count raises ConfigError that tells the valid format/points."""
    with pytest.raises(ConfigError) as info:
        faults.install({faults.ENV_VAR: spec})
    if spec.startswith("no_such"):
        for point in faults.CRASH_POINTS:
            assert point in str(info.value)
    assert not faults.armed()


def test_unset_env_means_no_crash_and_no_hook() -> None:
    """Without the variable every crash point is a no-op and record_log.write_hook stays unset."""
    faults.install({})
    for point in faults.CRASH_POINTS:
        faults.crash_point(point)
    assert faults.armed() == {}
    assert record_log.write_hook is None


def test_install_is_idempotent() -> None:
    """A second install() keeps the first configuration."""
    faults.install({faults.ENV_VAR: "after_tool_execute:3"})
    faults.install({faults.ENV_VAR: "before_checkpoint_put:1"})
    assert faults.armed() == {"after_tool_execute": frozenset({3})}


def test_process_exits_137_on_the_nth_arrival(tmp_path: Path) -> None:
    """AGENTRT_CRASH_AT=point:3 lets two arrivals pass and hard-exits with 137 on the third."""
    code = """
        from agent.core import faults
        faults.install()
        for i in range(1, 6):
            faults.crash_point("before_journal_append")
            faults.crash_point("after_tool_execute")
            print("passed", i, flush=True)
        print("finished", flush=True)
    """
    proc = run_py(code, "after_tool_execute:3", tmp_path)
    assert proc.returncode == faults.CRASH_EXIT_CODE, proc.stderr
    assert proc.stdout.split("\n")[:-1] == ["passed 1", "passed 2"]


def test_unarmed_process_runs_to_the_end(tmp_path: Path) -> None:
    """The same program without the variable finishes with status 0."""
    code = """
        from agent.core import faults
        faults.install()
        for _ in range(3):
            faults.crash_point("after_tool_execute")
        print("finished", flush=True)
    """
    proc = run_py(code, None, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "finished"


def test_unknown_point_in_env_fails_clearly(tmp_path: Path) -> None:
    """A typo in AGENTRT_CRASH_AT stops the process with a ConfigError naming the valid points."""
    proc = run_py("from agent.core import faults; faults.install()", "after_tool_exec:1", tmp_path)
    assert proc.returncode == 1
    assert "ConfigError" in proc.stderr and "after_tool_execute" in proc.stderr


def test_mid_event_write_leaves_a_torn_record_that_is_cut(tmp_path: Path) -> None:
    """mid_event_write:2 writes half of the second record and dies; reads skip it, repair cuts it to .broken."""
    log = tmp_path / "events.jsonl"
    code = f"""
        from pathlib import Path
        from agent.core import faults
        from checkpointing.record_log import RecordLog
        faults.install()
        log = RecordLog(Path({str(log)!r}))
        for i in range(3):
            log.append({{"type": "note", "i": i, "text": "x" * 40}})
        print("finished", flush=True)
    """
    proc = run_py(code, "mid_event_write:2", tmp_path)
    assert proc.returncode == faults.CRASH_EXIT_CODE, proc.stderr
    assert "finished" not in proc.stdout
    raw = log.read_bytes()
    assert not raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert [r["i"] for r in read_records(log)] == [0]
    assert log.read_bytes() == raw  # a read never modifies the file
    assert cut_torn_tail(log)
    broken = log.with_name("events.jsonl.broken").read_bytes()
    assert broken.startswith(b"{") and not broken.endswith(b"\n")
    assert log.read_bytes().endswith(b"\n")


def test_journal_crash_after_intent_leaves_intent_only(tmp_path: Path) -> None:
    """after_journal_append:1 kills the process after the INTENT, before the tool body runs."""
    marker = tmp_path / "tool-ran"
    code = f"""
        from pathlib import Path
        from pydantic import BaseModel
        from agent.core import faults
        from agent.core.tool_spec import ToolContext, ToolSpec
        from agent.tools.execute import execute_with_journal
        from agent.tools.journal import ToolExecutionJournal
        class A(BaseModel):
            text: str
        def body(ctx, text):
            Path({str(marker)!r}).write_text("ran")
            return "ok"
        faults.install()
        j = ToolExecutionJournal(Path({str(tmp_path)!r}), "acme", "s1")
        spec = ToolSpec(name="send", description="d", args_schema=A, func=body)
        execute_with_journal(j, "r1", {{"name": "send", "args": {{"text": "x"}}, "id": "c1"}}, spec,
                             ToolContext(session_id="s1", tenant_id="acme", run_id="r1"))
    """
    proc = run_py(code, "after_journal_append:1", tmp_path)
    assert proc.returncode == faults.CRASH_EXIT_CODE, proc.stderr
    assert not marker.exists()
    from agent.tools.journal import JournalStatus, ToolExecutionJournal

    state = ToolExecutionJournal(tmp_path, "acme", "s1").lookup("r1", "c1")
    assert state.status is JournalStatus.INTENT_ONLY and state.tool_name == "send"


DRILL = """
    import sys
    from pathlib import Path
    from pydantic import BaseModel
    from agent.core import faults
    from agent.core.tool_spec import ToolContext, ToolSpec
    from agent.tools.execute import execute_with_journal
    from agent.tools.journal import ToolExecutionJournal
    class A(BaseModel):
        text: str
    base, effect = Path(sys.argv[1]), sys.argv[2]
    def body(ctx, text):
        with open(base / "side-effects.txt", "a") as fh:
            fh.write(text + "\\n")
        return "sent " + text
    faults.install()
    j = ToolExecutionJournal(base, "acme", "s1")
    spec = ToolSpec(name="send", description="d", args_schema=A, func=body, effect=effect)
    call = {"name": "send", "args": {"text": "hello"}, "id": "c1"}
    ctx = ToolContext(session_id="s1", tenant_id="acme", run_id="r1")
    out = execute_with_journal(j, "r1", call, spec, ctx)
    print(out[1], out[2], flush=True)
"""


def run_drill(base: Path, effect: str, crash_at: str | None) -> subprocess.CompletedProcess[str]:
    """Run the one-tool drill program (optionally crashing) against `base`."""
    env = {k: v for k, v in os.environ.items() if k != faults.ENV_VAR}
    env["PYTHONPATH"] = str(REPO)
    if crash_at is not None:
        env[faults.ENV_VAR] = crash_at
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DRILL), str(base), effect],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("effect", "after_resume", "executions"),
    [("unsafe", "outcome_unknown False", 1), ("idempotent", "success False", 2)],
)
def test_crash_after_tool_execute_then_resume(tmp_path: Path, effect: str, after_resume: str, executions: int) -> None:
    """Killed after the tool ran but before COMPLETED: unsafe is not re-run, idempotent is; then replayed."""
    crashed = run_drill(tmp_path, effect, "after_tool_execute:1")
    assert crashed.returncode == faults.CRASH_EXIT_CODE, crashed.stderr
    resumed = run_drill(tmp_path, effect, None)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == after_resume
    assert (tmp_path / "side-effects.txt").read_text().count("hello") == executions
    if effect == "idempotent":
        assert run_drill(tmp_path, effect, None).stdout.strip() == "success True"
        assert (tmp_path / "side-effects.txt").read_text().count("hello") == executions


def test_interrupt_point_says_so_when_sigint_is_ignored(tmp_path: Path) -> None:
    """A process started with SIGINT ignored (a shell's background job) cannot be interrupted: the
    armed point says so on stderr instead of letting the drill pass unseen; with SIGINT at its
    default the same point raises KeyboardInterrupt."""
    code = """
        import signal, sys
        from agent.core import faults
        faults.install({faults.INTERRUPT_ENV_VAR: "turn_recorded:1"})
        if sys.argv[1] == "ignored":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            faults.crash_point("turn_recorded")
            for _ in range(1000):
                pass
        except KeyboardInterrupt:
            print("interrupted")
        else:
            print("ran on")
    """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    outs = {}
    for mode in ("ignored", "default"):
        ran = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), mode], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        outs[mode] = (ran.stdout.strip(), ran.stderr.strip())
    assert outs["ignored"] == (
        "ran on",
        "agentrt: AGENTRT_INTERRUPT_AT=turn_recorded: SIGINT is ignored in this process "
        "(started in the background?); nothing was interrupted",
    )
    assert outs["default"] == ("interrupted", "")
