"""A deleted branch, then `agentrt store gc` (retention and the blob reclaim it runs): the surviving
branch of the kept session still resumes, and its room's files read back, through the console script
in a fresh folder.

Two forks start at one entry; one of them is deleted (its fork point stays pinned for the other)
with a short `persistence.keep_last`, and an old ENDED session that stored the same file bytes is
reclaimed by retention, so the shared blobs and the kept branch's checkpoints are what gc must spare.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent.session.stores.jsonl import JsonlSessionStore
from tests.cli.console import agentrt
from tests.support.runners import make_config

PLAN = {"content": '{"plan": "p", "todos": ["x"]}'}


def _write(path: str, text: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "args": {"path": path, "content": text}}]}


def _read(*paths: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "args": {"path": p}} for p in paths]}


# The script position is the branch's model-call count: turn 1 (0-2), turn 2 on the fork (3-5),
# the turn after gc (6-8). The old session plays turn 1 again: the same file bytes.
SCRIPT = [
    PLAN,
    _write("a.txt", "shared by both sessions"),
    {"content": "one"},
    PLAN,
    _write("b.txt", "only on the kept branch"),
    {"content": "two"},
    PLAN,
    _read("a.txt", "b.txt"),
    {"content": "three"},
]


def _ok(work: Path, config: Path, *args: str) -> Any:
    ran = agentrt(*args, "--config", str(config), "--json", cwd=work)
    assert ran.code == 0, f"agentrt {' '.join(args)}: {ran.both}"
    return json.loads(ran.out)


def _age(base: Path, tenant: str, sid: str, by: timedelta) -> None:
    """Move the session's last activity `by` into the past (as if it had been left that long)."""
    store = JsonlSessionStore(base, fsync="never")
    s = store.get(tenant, sid)
    assert s is not None
    s.last_active_time = datetime.now(UTC) - by
    store.put(s)
    store.index.close()


def test_gc_after_a_branch_delete_keeps_the_surviving_branch_resumable(tmp_path: Path) -> None:
    config = make_config(tmp_path, SCRIPT, session={"retention_days": 1 / 24}, persistence={"keep_last": 3})
    base = tmp_path / "agentrt"
    sid = _ok(tmp_path, config, "run", "--approve-all", "turn one")["session_id"]
    entries = _ok(tmp_path, config, "show", sid, "--last", "5000")["entries"]
    answer = [e["id"] for e in entries if e["type"] == "assistant_message"][-1]
    kept, gone = (_ok(tmp_path, config, "fork", sid, "--from", answer)["branch_id"] for _ in range(2))
    _ok(tmp_path, config, "switch", sid, kept)
    assert _ok(tmp_path, config, "run", "--session", sid, "--approve-all", "turn two")["status"] == "COMPLETED"
    assert "deleted" in agentrt("branch", "delete", sid, gone, "--config", str(config), cwd=tmp_path).out

    old = _ok(tmp_path, config, "run", "--new-session", "old-one", "--approve-all", "turn one")["session_id"]
    _ok(tmp_path, config, "end", old)
    _age(base, "default", old, timedelta(hours=2))
    room = base / "tenants" / "default" / "sessions" / sid / "rooms" / kept
    files = {p.name: p.read_bytes() for p in room.iterdir() if p.is_file()}
    assert set(files) >= {"a.txt", "b.txt"}

    gc = agentrt("store", "gc", "--config", str(config), cwd=tmp_path)
    assert gc.code == 0 and "deleted 1 sessions" in gc.out, gc.both
    listed = {r["session_id"] for r in _ok(tmp_path, config, "sessions", "--limit", "0")}
    assert listed == {sid}
    assert [r["branch_id"] for r in _ok(tmp_path, config, "branches", sid)] == ["main", kept]
    doctor = _ok(tmp_path, config, "doctor", sid)
    assert all(c["status"] != "FAIL" for c in doctor["checks"]), doctor

    # the kept branch resumes where it was and reads its room's files back
    done = _ok(tmp_path, config, "run", "--session", sid, "--approve-all", "turn three")
    assert done["status"] == "COMPLETED" and done["answer"] == "three", done
    state = _ok(tmp_path, config, "show", sid, "--last", "5000")
    turn = [e for e in state["entries"] if e["type"] == "user_turn"][-1]
    assert turn["branch_id"] == kept
    results = [e for e in state["entries"] if e["type"] == "tool_result"][-2:]
    assert [e["branch_id"] for e in results] == [kept, kept]
    calls = [re.search(r'"tool_call_id": "([^"]+)"', e["summary"]).group(1) for e in results]  # type: ignore[union-attr]
    read = [_ok(tmp_path, config, "tool-result", sid, call)["text"] for call in calls]
    assert read == ["shared by both sessions", "only on the kept branch"]
    assert {p.name: p.read_bytes() for p in room.iterdir() if p.is_file()} == files
