"""After a turn ends with `context_exhausted`, the session is not stuck: its next turn runs."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from tests.e2e.test_context_exhaustion import EXHAUSTING, _model, _plan, _runner

NEXT_TURN = [_plan("Report what is known."), {"content": "Beta sensors: 100 rows dumped, all status ok."}]


def test_next_turn_after_context_exhausted_starts_from_the_compacted_context(tmp_path: Path) -> None:
    """FAILED context_exhausted, then `run(session_id=...)`: COMPLETED, every prompt inside the window."""
    runner = _runner(tmp_path, EXHAUSTING + NEXT_TURN, window=1000)
    first = runner.run("Dump the sensors and report.", new_session_id="s-after")
    assert (first.status, first.finish_reason) == ("FAILED", "context_exhausted")

    second = runner.run("What do we know so far?", session_id="s-after")

    assert second.status == "COMPLETED", second.error
    assert second.answer == NEXT_TURN[1]["content"]
    prompts = _model(runner, "s-after").calls  # the model of the new turn's runtime
    assert len(prompts) == len(NEXT_TURN)
    # the new turn's prompts carry the new question and fit the 1000-token window (the context stayed
    # compacted; the planning prompt is not compressed, so it may pass the 95% mark the loop keeps)
    assert any(isinstance(m, HumanMessage) and "What do we know so far?" in str(m.content) for m in prompts[0])
    assert max(count_tokens_approximately(p) for p in prompts) < 1000
    session = runner.manager.get("default", "s-after")
    assert (session.last_run_status, session.loop_count) == ("COMPLETED", 2)
