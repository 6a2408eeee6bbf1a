"""Helpers of the saver-over-PostgreSQL tests: a kit over a fresh schema, checkpoints put by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpointing.saver import JsonlCheckpointSaver
from tests.support.savers import SaverKit, delta_graph

CFG: Any = {"configurable": {"thread_id": "s1", "tenant_id": "acme"}}


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[SaverKit]:
    """A kit over a fresh PostgreSQL schema."""
    kit = SaverKit.open("postgres", tmp_path)
    yield kit
    kit.close()


def _state(saver: JsonlCheckpointSaver) -> Any:
    history = [(h.values, h.next, h.metadata) for h in delta_graph(saver).get_state_history(CFG)]
    return history, [(t.checkpoint, t.pending_writes) for t in saver.list(CFG)]


def _cfg(thread: str, parent: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if parent:
        conf["checkpoint_id"] = parent
    return {"configurable": conf}


def _put(saver: JsonlCheckpointSaver, thread: str, parent: str | None, i: int) -> str:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = {"count": i, "note": f"step {i}"}
    cp["channel_versions"] = {"count": i + 1, "note": i + 1}
    new = {"count": i + 1, "note": i + 1}
    return str(saver.put(_cfg(thread, parent), cp, {"source": "loop", "step": i}, new)["configurable"]["checkpoint_id"])
