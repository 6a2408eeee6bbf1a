"""`agentrt branches`, `switch` and `branch rename|delete` through the installed console script.

Two forks of a demo session: `branches` lists the three with their fork points and the current one
marked; `switch` (by id or by name) makes the next turn run on that branch, in its room; `branch
delete` takes a branch out of `branches`, `show` and the `sessions` count while every earlier line
of events.jsonl stays byte-identical. Refusals: deleting main or the current branch, switching while
a run waits for an approval or once the session is ENDED (exit 4); an unknown branch (exit 3); a
second tenant or user sees nothing (exit 3).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.cli.console import Ran, agentrt

DEMO = "Summarise the 2026 sales by region"


def _ok(work: Path, *args: str) -> Ran:
    ran = agentrt(*args, cwd=work)
    assert ran.code == 0, f"agentrt {' '.join(args)}: {ran.both}"
    return ran


def _json(work: Path, *args: str) -> Any:
    return json.loads(_ok(work, *args, "--json").out)


def _refused(ran: Ran, code: int, *words: str) -> str:
    assert ran.code == code, ran.both
    line = ran.error_line()
    for w in words:
        assert w in line, line
    return line


def _session_dir(work: Path, sid: str) -> Path:
    return work / ".agentrt" / "tenants" / "default" / "sessions" / sid


def _entries(work: Path, sid: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = _json(work, "show", sid, "--last", "5000")["entries"]
    return entries


def _forked(work: Path, forks: int) -> tuple[str, str, list[str]]:
    """A completed demo turn and `forks` forks from its answer: (session, answer entry, fork ids)."""
    sid = _json(work, "run", "--approve-all", DEMO)["session_id"]
    answer = [e["id"] for e in _entries(work, sid) if e["type"] == "assistant_message"][-1]
    return sid, answer, [_json(work, "fork", sid, "--from", answer)["branch_id"] for _ in range(forks)]


def test_list_switch_rename_delete(tmp_path: Path) -> None:
    """The whole round: list, rename, switch by name, a turn on that branch, delete, refusals."""
    sid, answer, (one, two) = _forked(tmp_path, 2)

    rows = _json(tmp_path, "branches", sid)
    assert [r["branch_id"] for r in rows] == ["main", one, two]
    assert [r["from_entry_id"] for r in rows] == [None, answer, answer]
    assert [r["current"] for r in rows] == [False, False, True]  # the newest fork is current
    assert rows[0]["turns"] == 1 and rows[1]["turns"] == 0
    text = _ok(tmp_path, "branches", sid).out.splitlines()
    assert text[0].split() == ["BRANCH", "NAME", "FROM", "ENTRY", "HEAD", "ENTRY", "TURNS", "STATUS"]
    assert re.match(rf"\s+main\s+-\s+-\s+{rows[0]['head_entry_id']}\s+1\s+live$", text[1]), text[1]
    assert re.match(rf"\s+{one}\s+-\s+{answer}\s+\S+\s+0\s+live$", text[2]), text[2]
    assert re.match(rf"\*\s+{two}\s+-\s+{answer}\s+\S+\s+0\s+live$", text[3]), text[3]

    # rename, then the name is accepted wherever a branch id is
    assert _ok(tmp_path, "branch", "rename", sid, one, "east-only").out.strip() == f"branch {one} is named east-only"
    _refused(agentrt("branch", "rename", sid, two, "east-only", cwd=tmp_path), 4, "is taken", "agentrt branches")
    _refused(agentrt("branch", "rename", sid, two, "east only", cwd=tmp_path), 2, "invalid branch name")
    switched = _ok(tmp_path, "switch", sid, "east-only").out
    assert f"session {sid} is on branch {one} (east-only)" in switched
    rows = _json(tmp_path, "branches", sid)
    assert [(r["name"], r["current"]) for r in rows] == [(None, False), ("east-only", True), (None, False)]

    # the next turn runs on the branch switched to, in its own room
    rooms = _session_dir(tmp_path, sid) / "rooms"
    for room in (rooms / one, rooms / two):  # each fork's room was copied with the fork point's report
        (room / "report.md").unlink()
    head_two = rows[2]["head_entry_id"]
    assert _json(tmp_path, "run", "--session", sid, "--approve-all", "Once more")["status"] == "COMPLETED"
    turn = [e for e in _entries(tmp_path, sid) if e["type"] in ("user_turn", "assistant_message")][-2:]
    assert [e["branch_id"] for e in turn] == [one, one]
    assert (rooms / one / "report.md").exists() and not (rooms / two / "report.md").exists()
    rows = _json(tmp_path, "branches", sid)
    assert rows[1]["turns"] == 1 and rows[2]["head_entry_id"] == head_two

    # delete: not main, not the current branch; then the other fork
    _refused(agentrt("branch", "delete", sid, "main", cwd=tmp_path), 4, "main", "cannot be deleted")
    _refused(agentrt("branch", "delete", sid, "east-only", cwd=tmp_path), 4, "current branch", f"agentrt switch {sid}")
    log = _session_dir(tmp_path, sid) / "events.jsonl"
    before = log.read_bytes().splitlines()
    assert "deleted" in _ok(tmp_path, "branch", "delete", sid, two).out
    after = log.read_bytes().splitlines()
    assert after[: len(before)] == before  # every earlier line, the deleted branch's too, byte-identical
    added = [json.loads(line)["type"] for line in after[len(before) :]]
    assert added == ["branch_deleted", "sandbox_destroyed"] and not (rooms / two).exists()
    assert [r["branch_id"] for r in _json(tmp_path, "branches", sid)] == ["main", one]
    assert set(_json(tmp_path, "show", sid)["branches"]) == {"main", one}
    shown = _ok(tmp_path, "show", sid).out
    assert two not in shown.split("\nbranches\n")[1]
    assert re.search(rf"\* {one} .*\(named east-only\)$", shown, flags=re.M)
    assert f"conversation (branch {one})" in _ok(tmp_path, "show", sid, "--branch", "east-only").out
    listed = _ok(tmp_path, "sessions").out.splitlines()
    assert re.match(rf"{sid}\s+ACTIVE\s+2\s+2\s", listed[1]), listed
    _refused(agentrt("switch", sid, two, cwd=tmp_path), 3, f"has no branch {two}", f"agentrt branches {sid}")
    _refused(agentrt("branch", "delete", sid, two, cwd=tmp_path), 3, "has no branch")

    # back to main: its leaf is where it was
    assert _json(tmp_path, "switch", sid, "main")["current_branch_id"] == "main"
    assert _json(tmp_path, "branches", sid)[0]["current"] is True


def test_unknown_branch_and_other_tenant_or_user(tmp_path: Path) -> None:
    """An unknown branch: exit 3, one line; another tenant or user cannot list, switch, rename, delete."""
    sid, _, (one,) = _forked(tmp_path, 1)
    _refused(agentrt("switch", sid, "nope", cwd=tmp_path), 3, f"session {sid} has no branch nope")
    _refused(agentrt("branch", "rename", sid, "nope", "x", cwd=tmp_path), 3, "has no branch nope")
    for who in (["--tenant", "acme"], ["--user", "bob"]):
        _refused(agentrt("branches", sid, *who, cwd=tmp_path), 3, f"session {sid} not found")
        _refused(agentrt("switch", sid, one, *who, cwd=tmp_path), 3, "not found")
        _refused(agentrt("branch", "rename", sid, one, "mine", *who, cwd=tmp_path), 3, "not found")
        _refused(agentrt("branch", "delete", sid, one, *who, cwd=tmp_path), 3, "not found")
    rows = _json(tmp_path, "branches", sid)  # nothing changed
    assert [(r["name"], r["current"]) for r in rows] == [(None, False), (None, True)]


def test_switch_refused_while_paused_for_approval_or_ended(tmp_path: Path) -> None:
    """A run waiting for an approval on the current branch, then an ENDED session: exit 4, what to do."""
    sid, _, (one,) = _forked(tmp_path, 1)
    assert _json(tmp_path, "run", "--session", sid, "Publish it")["status"] == "PAUSED"
    _refused(agentrt("switch", sid, "main", cwd=tmp_path), 4, "PAUSED", f"agentrt resume {sid}")
    _ok(tmp_path, "end", sid)
    _refused(agentrt("switch", sid, "main", cwd=tmp_path), 4, "ENDED", "cannot switch branches", "agentrt fork")
    current = [r["branch_id"] for r in _json(tmp_path, "branches", sid) if r["current"]]
    assert current == [one]
