"""`agentrt show` and `agentrt sessions` as a user reads them, on a forked session and several users."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli.console import agentrt


def _run(work: Path, *args: str) -> dict[str, object]:
    ran = agentrt("run", "--json", *args, cwd=work)
    assert ran.code == 0, ran.both
    result: dict[str, object] = json.loads(ran.out)
    return result


def test_show_renders_the_conversation_branches_and_pending_approval(tmp_path: Path) -> None:
    """User turns, tool calls with ids/status/size, the decision and who made it, the fork, the pending question."""
    sid = str(_run(tmp_path, "Summarise the 2026 sales by region")["session_id"])
    rejected = agentrt("resume", sid, "--reject", "--reason", "not yet", "--operator", "alice", "--json", cwd=tmp_path)
    assert json.loads(rejected.out)["status"] == "COMPLETED", rejected.both
    machine = json.loads(agentrt("show", sid, "--json", "--last", "500", cwd=tmp_path).out)
    answer_entry = [e["id"] for e in machine["entries"] if e["type"] == "assistant_message"][-1]
    fork = agentrt("fork", sid, "--from", answer_entry, "--json", cwd=tmp_path)
    branch = json.loads(fork.out)["branch_id"]
    assert _run(tmp_path, "--session", sid, "Publish it now")["status"] == "PAUSED"

    shown = agentrt("show", sid, cwd=tmp_path)
    assert shown.code == 0, shown.both
    text = shown.out
    assert f"conversation (branch {branch})" in text
    assert "user> Summarise the 2026 sales by region" in text and "user> Publish it now" in text
    assert re.search(r"tool query_dataset \[call_3_1\] .*\n\s+-> success, 14744 chars", text)
    assert "approval rejected by alice (not yet): publish_report [call_6_1]" in text
    assert "-> rejected" in text and "it was NOT published" in text
    assert f"forked from main at entry {answer_entry}" in text
    assert re.search(rf"\* {branch}\s+\d+ entries", text)  # the current branch is marked
    assert f"approve: agentrt resume {sid} --approve" in text
    assert f'reject:  agentrt resume {sid} --reject --reason "..."' in text

    main_only = agentrt("show", sid, "--branch", "main", cwd=tmp_path).out
    assert "conversation (branch main)" in main_only and "Publish it now" not in main_only
    # the machine form is unchanged
    machine = json.loads(agentrt("show", sid, "--json", cwd=tmp_path).out)
    assert {"session", "header", "branches", "checkpoint", "entries"} <= set(machine)
    assert set(machine["branches"]) == {"main", branch}


def test_sessions_table_newest_first_with_filters(tmp_path: Path) -> None:
    """id, status, branches, turns, relative time, first message; --status, --limit; per user and tenant."""
    first = str(_run(tmp_path, "--approve-all", "First question")["session_id"])
    second = str(_run(tmp_path, "--user", "bob", "Second question")["session_id"])  # PAUSED
    third = str(_run(tmp_path, "--tenant", "acme", "--approve-all", "Other tenant")["session_id"])

    table = agentrt("sessions", cwd=tmp_path)
    assert table.code == 0, table.both
    lines = table.out.splitlines()
    assert re.match(r"SESSION\s+STATUS\s+BRANCHES\s+TURNS\s+LAST ACTIVITY\s+FIRST MESSAGE", lines[0])
    assert [ln.split()[0] for ln in lines[1:]] == [second, first]  # newest first; no other tenant
    assert re.search(rf"{second}\s+PAUSED\s+1\s+1\s+\d+ s ago\s+Second question", table.out)
    assert re.search(rf"{first}\s+ACTIVE\s+1\s+1\s+\d+ s ago\s+First question", table.out)

    paused = agentrt("sessions", "--status", "paused", cwd=tmp_path).out
    assert second in paused and first not in paused
    limited = agentrt("sessions", "--limit", "1", cwd=tmp_path).out
    assert second in limited and first not in limited
    bob = json.loads(agentrt("sessions", "--user", "bob", "--json", cwd=tmp_path).out)
    assert [s["session_id"] for s in bob] == [second] and bob[0]["first_message"] == "Second question"
    acme = agentrt("sessions", "--tenant", "acme", cwd=tmp_path).out
    assert third in acme and first not in acme
    assert "no sessions" in agentrt("sessions", "--tenant", "nobody", cwd=tmp_path).out
