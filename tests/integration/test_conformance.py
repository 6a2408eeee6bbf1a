"""LangGraph's checkpointer conformance suite (langgraph-checkpoint-conformance) against the JSONL saver."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path

from langgraph.checkpoint.conformance import checkpointer_test, validate

from checkpointing.saver import JsonlCheckpointSaver

_ROOT: list[Path] = []


async def _lifespan() -> AsyncGenerator[None, None]:
    with tempfile.TemporaryDirectory(prefix="agentrt-conformance-") as tmp:
        _ROOT.append(Path(tmp))
        yield
        _ROOT.pop()


@checkpointer_test(name="JsonlCheckpointSaver", lifespan=_lifespan)
async def jsonl_saver() -> AsyncGenerator[JsonlCheckpointSaver, None]:
    # A fresh base_dir per capability suite, as the suite expects an empty saver each time.
    with tempfile.TemporaryDirectory(dir=_ROOT[-1]) as base:
        yield JsonlCheckpointSaver(base, fsync="batch")


async def test_conformance_every_capability_passes() -> None:
    """Every capability of the conformance suite is detected on the saver and passes."""
    report = await validate(jsonl_saver)
    failures = {cap: r.failures for cap, r in report.results.items() if r.passed is False}
    skipped = sorted(cap for cap, r in report.results.items() if r.passed is None)
    assert not failures, failures
    assert skipped == [], f"capabilities not run: {skipped}"
