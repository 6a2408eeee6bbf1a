"""The saver refuses checkpoint writes from a lease holder that was superseded (fencing token)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from checkpointing.errors import StaleFencingTokenError
from checkpointing.fencing import FencingGuard
from checkpointing.saver import JsonlCheckpointSaver


def _config(token: int | None) -> dict:
    return {"configurable": {"thread_id": "s1", "tenant_id": "t1", "checkpoint_ns": "", "fencing_token": token}}


def test_stale_token_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """After token 2 was granted, a put with token 1 fails and the file does not change."""
    saver = JsonlCheckpointSaver(tmp_path)
    cp = empty_checkpoint()
    saver.put(_config(1), cp, {"source": "input", "step": -1}, {})
    FencingGuard.for_session(tmp_path, "t1", "s1").check_and_raise(2)
    files = sorted((tmp_path / "tenants").rglob("checkpoints.jsonl"))
    before = [f.read_bytes() for f in files]
    cp2 = empty_checkpoint()
    with pytest.raises(StaleFencingTokenError):
        saver.put(_config(1), cp2, {"source": "loop", "step": 0}, {})
    assert [f.read_bytes() for f in files] == before
    saver.put(_config(2), cp2, {"source": "loop", "step": 0}, {})  # the new owner writes fine
