"""A long-lived `agentrt serve`: the finished runs it keeps cost the same whether it has served ten
runs or thousands. Old finished runs keep only what the API still answers from them (status,
values), not their job, stream translator or log, so the collector's full passes do not walk more
and more of them; and they still answer as before.

The server keeps its newest `KEEP_FINISHED_RUNS` finished runs, the newest `KEEP_EVENTS_OF` of
them with their events; both are lowered here so that a few runs reach the steady state.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agent.core.config import load_settings
from agent.serve import engine
from agent.serve.app import create_app
from agent.serve.run_record import RunRecord
from tests.support.runners import make_config

TURNS = 12
PLAN = {"content": json.dumps({"plan": "Answer at once.", "todos": ["Answer"]})}


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Any]]:
    monkeypatch.setattr(engine, "KEEP_EVENTS_OF", 2)
    monkeypatch.setattr(engine, "KEEP_FINISHED_RUNS", 6)
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"on_exhausted": "restart", "responses": [PLAN, {"content": "Done."}]}))
    app = create_app(load_settings(make_config(tmp_path, model={"script": str(script)}, datasets=[])))
    with TestClient(app) as http:
        yield http, app.state.ctx


def _turn(http: TestClient, i: int) -> tuple[str, str]:
    tid = http.post("/threads", json={}).json()["thread_id"]
    r = http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "agentrt", "input": {"user_input": f"turn {i}"}})
    r.raise_for_status()
    return tid, r.headers["content-location"].rsplit("/", 1)[-1]


def _held(rec: RunRecord) -> int:
    """Objects the collector tracks that the record alone holds (not what start-up built, frozen)."""
    young = {id(o) for o in gc.get_objects()}
    seen: set[int] = set()
    todo: list[Any] = [rec]
    while todo:
        for ref in gc.get_referents(todo.pop()):
            if id(ref) in young and id(ref) not in seen:
                seen.add(id(ref))
                todo.append(ref)
    return len(seen)


def test_old_finished_runs_hold_little_and_still_answer(served: tuple[TestClient, Any]) -> None:
    http, ctx = served
    gc.collect()
    gc.freeze()  # as `agentrt serve` does once started: what start-up built is not the runs'
    try:
        runs = [_turn(http, i) for i in range(TURNS)]
        kept = [ctx.engine.get("default", run_id) for _, run_id in runs]
        gc.collect()
        # Kept as the last run started: the 6 newest finished runs (the newest 2 with their events),
        # and that run; the older ones are gone.
        assert [rec is not None for rec in kept] == [False] * (TURNS - 7) + [True] * 7
        trimmed = [rec for rec in kept if rec is not None and rec.trimmed]
        assert len(trimmed) == 4
        held = [_held(rec) for rec in trimmed]
        assert max(held) < 60, held  # its values and status, not its job, translator and log
        assert all(rec.job is None for rec in trimmed)
        newest = kept[-1]
        assert newest is not None and not newest.trimmed and newest.events
    finally:
        gc.unfreeze()
    # Every run still answers: the kept ones from memory, the others from the thread's run table.
    for tid, run_id in runs:
        got = http.get(f"/threads/{tid}/runs/{run_id}")
        assert got.status_code == 200 and got.json()["status"] == "success"
        joined = http.get(f"/threads/{tid}/runs/{run_id}/join")
        assert joined.status_code == 200
        assert joined.json()["messages"][-1]["content"] == "Done."
