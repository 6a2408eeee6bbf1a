"""LangGraph's checkpointer conformance suite (langgraph-checkpoint-conformance) against the JSONL
saver, over the files store and over the PostgreSQL store."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate

from checkpointing.saver import JsonlCheckpointSaver
from tests.support.savers import DATABASE_URL

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


@checkpointer_test(name="JsonlCheckpointSaver[postgres]")
async def jsonl_saver_postgres() -> AsyncGenerator[JsonlCheckpointSaver, None]:
    # A fresh schema per capability suite, dropped after it.
    from checkpointing.store.postgres import PostgresStore

    store = PostgresStore(DATABASE_URL, schema=f"conf_{uuid.uuid4().hex[:12]}", max_connections=2)
    store.setup()
    saver = JsonlCheckpointSaver(store=store, fsync="batch")
    try:
        yield saver
    finally:
        with store.connection("dropping the test schema") as conn:
            conn.execute(f'DROP SCHEMA "{store.schema}" CASCADE')
        store.close()


@pytest.mark.parametrize("suite", [jsonl_saver, jsonl_saver_postgres], ids=["files", "postgres"])
async def test_conformance_every_capability_passes(suite: object) -> None:
    """Every capability of the conformance suite is detected on the saver and passes."""
    report = await validate(suite)  # type: ignore[arg-type]
    assert report.results, "the suite ran no capability"
    failures = {cap: r.failures for cap, r in report.results.items() if r.passed is False}
    skipped = sorted(cap for cap, r in report.results.items() if r.passed is None)
    assert not failures, failures
    assert skipped == [], f"capabilities not run: {skipped}"
