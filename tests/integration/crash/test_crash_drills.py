"""Crash drills: every fault-injection point hard-exits a real `agentrt run`, `agentrt resume` finishes it.

The drill task (agent/assets/scripts/drill.yaml) has seven tool iterations with several tool calls per
message, an unsafe user tool `bump` (appends to a counter file outside base_dir) and a read-only
`peek`. After the resume, the final result and state must equal an uncrashed reference run's; the
only allowed difference is an unsafe call whose INTENT was journaled but that never completed: it
becomes an "outcome unknown" tool message instead of a second run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.crash import (
    DRILL_TEXT,
    SIGKILL_CODE,
    child_env,
    counter_lines,
    expected_after_unknown,
    make_drill_config,
    read_state,
    result_view,
    resume_until_done,
    run_cli,
    session_path,
    unfinished_unsafe_calls,
)
from tests.support.zygote import Zygote

LABELS = ["alpha", "beta", "gamma", "delta", "epsilon"]
SID = "drill-1"

# (AGENTRT_CRASH_AT, what the resume must show). "same": equal to the reference; "unknown:<call>":
# that unsafe call ends as outcome unknown; "auto": decided from the journal left by the crash.
CASES = [
    ("after_tool_execute:1", "unknown:call_2_1"),  # bump alpha ran, COMPLETED never written
    ("after_tool_execute:3", "same"),  # write_file (idempotent) re-runs
    ("after_tool_execute:6", "same"),  # calculator (read-only) re-runs
    ("after_tool_execute:8", "unknown:call_5_3"),  # bump delta, second unsafe call of one message
    ("before_checkpoint_put:11", "same"),  # acting's writes saved, its checkpoint not (puts: input, init,
    ("before_checkpoint_put:17", "same"),  # planning, then reasoning and acting a tool step: acting is odd)
    ("after_checkpoint_put:5", "same"),
    ("after_checkpoint_put:18", "same"),
    ("before_journal_append:7", "same"),  # before bump beta's INTENT: it never started
    ("before_journal_append:14", "unknown:call_5_2"),  # bump gamma ran, its COMPLETED not appended
    ("after_journal_append:1", "unknown:call_2_1"),  # INTENT of bump alpha durable, tool never called
    ("after_journal_append:8", "same"),  # bump beta COMPLETED: replayed, not re-run
    ("mid_event_write:40", "auto"),
    ("mid_event_write:120", "auto"),
]


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """A fork server: each `agentrt` process of the matrix is a fresh fork that skips the imports."""
    with Zygote(tmp_path_factory.mktemp("zygote")) as z:
        yield z


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An uncrashed run of the drill (a plain `python -m agent.cli run`): its --json result and final state."""
    tmp = tmp_path_factory.mktemp("reference")
    cfg = make_drill_config(tmp)
    proc = run_cli(
        ["run", "--config", str(cfg), "--new-session", SID, "--json", DRILL_TEXT], child_env(tmp / "counter")
    )
    assert proc.code == 0, proc.stderr
    assert counter_lines(tmp / "counter") == LABELS
    return {"result": result_view(proc.json()), "state": read_state(cfg, SID)}


@pytest.mark.parametrize(("crash_at", "expect"), CASES)
def test_crash_point_resumes_to_reference(
    tmp_path: Path, reference: dict[str, Any], zygote: Zygote, crash_at: str, expect: str
) -> None:
    """A run hard-exited at a crash point resumes to the reference result; no unsafe call runs twice."""
    cfg = make_drill_config(tmp_path)
    counter = tmp_path / "counter"
    argv = ["run", "--config", str(cfg), "--new-session", SID, "--json", DRILL_TEXT]
    crashed = zygote.run(argv, child_env(counter, crash_at))
    assert crashed.code == SIGKILL_CODE, f"did not crash at {crash_at}: {crashed.stderr[-800:]}"
    unknown = unfinished_unsafe_calls(session_path(cfg, SID))
    if expect.startswith("unknown:"):
        assert set(unknown) == {expect.split(":", 1)[1]}
    elif expect == "same":
        assert unknown == {}

    resumed, _ = resume_until_done(zygote.run, cfg, SID, child_env(counter))
    assert resumed.code == 0, resumed.stderr[-2000:]
    result = result_view(resumed.json())
    bumped = counter_lines(counter)
    assert len(bumped) == len(set(bumped)), f"an unsafe call ran twice: {bumped}"
    assert result["status"] == "COMPLETED"
    assert result == reference["result"]
    state = read_state(cfg, SID)
    if unknown:
        assert state == expected_after_unknown(reference["state"], state, unknown, bumped)
        labels = _bump_labels(reference["state"])
        assert set(LABELS) - set(bumped) <= {labels[cid] for cid in unknown if cid in labels}
        assert bumped == [x for x in LABELS if x in bumped]
    else:
        assert state == reference["state"]
        assert bumped == LABELS


def test_resume_after_crash_reports_what_it_recovered(tmp_path: Path) -> None:
    """A plain `python -m agent.cli` crash + resume names the checkpoint, next node and replayed calls."""
    cfg = make_drill_config(tmp_path)
    counter = tmp_path / "counter"
    crashed = run_cli(
        ["run", "--config", str(cfg), "--new-session", SID, DRILL_TEXT], child_env(counter, "after_journal_append:8")
    )
    assert crashed.code == SIGKILL_CODE
    resumed = run_cli(["resume", SID, "--config", str(cfg)], child_env(counter))
    assert resumed.code == 0, resumed.stderr
    text = " ".join(resumed.stderr.split())
    assert "recovered checkpoint" in text and "next acting" in text
    assert "tool calls of this run already done as `show` lists them (4 in the tool journal" in text, text
    assert "status COMPLETED" in resumed.stdout + resumed.stderr  # the summary line is progress (stderr)


def _bump_labels(state: dict[str, Any]) -> dict[str, str]:
    """{tool_call_id: label} of the reference's bump calls."""
    return {
        call["id"]: call["args"]["label"]
        for msg in state["messages"]
        for call in msg.get("tool_calls") or []
        if call["name"] == "bump"
    }
