"""The saver refuses checkpoint writes from a lease holder that was superseded (fencing token)."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from checkpointing.exceptions import StaleFencingTokenError
from checkpointing.fencing import FencingGuard
from tests.support.savers import SaverKit


def _config(token: int | None) -> dict:
    return {"configurable": {"thread_id": "s1", "tenant_id": "t1", "checkpoint_ns": "", "fencing_token": token}}


def test_stale_token_is_refused_and_nothing_is_written(saver_kit: SaverKit) -> None:
    """After token 2 was granted, a put with token 1 fails and the stored records do not change."""
    saver = saver_kit()
    cp = empty_checkpoint()
    saver.put(_config(1), cp, {"source": "input", "step": -1}, {})
    saver_kit.store().session("t1", "s1", "always").advance_fence(2)
    before = saver_kit.raw("s1", tenant="t1")
    cp2 = empty_checkpoint()
    with pytest.raises(StaleFencingTokenError):
        saver.put(_config(1), cp2, {"source": "loop", "step": 0}, {})
    with pytest.raises(StaleFencingTokenError):
        saver.put_writes({"configurable": {**_config(1)["configurable"], "checkpoint_id": cp["id"]}}, [("a", 1)], "t")
    assert saver_kit.raw("s1", tenant="t1") == before
    saver.put(_config(2), cp2, {"source": "loop", "step": 0}, {})  # the new owner writes fine
    assert saver_kit.raw("s1", tenant="t1").startswith(before) and len(saver_kit.raw("s1", tenant="t1")) > len(before)


def test_the_files_fence_is_the_session_folders_fencing_guard(saver_kit: SaverKit) -> None:
    """On files the store's fence is `FencingGuard` of the session folder (what the lease code grants)."""
    if saver_kit.kind != "files":
        pytest.skip("PostgreSQL keeps the fence in a row (jsonl_fences), not in fence.json")
    saver = saver_kit()
    saver.put(_config(1), empty_checkpoint(), {"source": "input", "step": -1}, {})
    FencingGuard.for_session(saver_kit.base, "t1", "s1").check_and_raise(2)
    with pytest.raises(StaleFencingTokenError):
        saver.put(_config(1), empty_checkpoint(), {"source": "loop", "step": 0}, {})
