"""Small things a user sees: the sessions table, tool-result's last line, YAML errors, resume's count."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from tests.cli.console import agentrt

TASK = "Summarise the 2026 sales by region"


@pytest.fixture(scope="module")
def paused(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A fresh folder where the demo ran without a terminal: paused for its approval. (folder, session id)"""
    work = tmp_path_factory.mktemp("demo")
    ran = agentrt("run", "--json", TASK, cwd=work)
    assert ran.code == 0, ran.both
    result = json.loads(ran.out)
    assert result["status"] == "PAUSED", result
    return work, str(result["session_id"])


def test_sessions_columns_fit_a_uuid_id(paused: tuple[Path, str]) -> None:
    """With a 36-character id listed, every value starts under its heading (counts end under theirs)."""
    work, short_id = paused
    long_id = str(uuid.uuid4())
    ran = agentrt("run", "--approve-all", "--new-session", long_id, "Again, shorter", cwd=work)
    assert ran.code == 0, ran.both
    listed = agentrt("sessions", cwd=work)
    assert listed.code == 0, listed.both
    head, *rows = listed.out.splitlines()
    starts = {name: head.index(name) for name in ("STATUS", "LAST ACTIVITY", "FIRST MESSAGE")}
    ends = {name: head.index(name) + len(name) for name in ("BRANCHES", "TURNS")}
    assert {r.split()[0] for r in rows} == {long_id, short_id}
    for row in rows:
        session = row.split()[0]
        status = "PAUSED" if session == short_id else "ACTIVE"
        assert row[starts["STATUS"] :].startswith(status + " "), f"\n{head}\n{row}"
        assert row[: ends["BRANCHES"]].endswith(" 1") and row[: ends["TURNS"]].endswith(" 1"), f"\n{head}\n{row}"
        assert re.match(r"\d+ (s|min|h|d) ago ", row[starts["LAST ACTIVITY"] :]), f"\n{head}\n{row}"
        first = TASK if session == short_id else "Again, shorter"
        assert row[starts["FIRST MESSAGE"] :] == first, f"\n{head}\n{row}"


def test_tool_result_ends_its_line_and_keeps_the_text(paused: tuple[Path, str]) -> None:
    """The page printed ends with a newline; the text before it is exactly the stored slice."""
    work, sid = paused
    plain = agentrt("tool-result", sid, "call_3_1", "--offset", "0", "--limit", "500", cwd=work)
    assert plain.code == 0, plain.both
    assert plain.out.endswith("\n")
    exact = agentrt("tool-result", sid, "call_3_1", "--offset", "0", "--limit", "500", "--json", cwd=work)
    text = json.loads(exact.out)["text"]
    assert len(text) == 500 and not text.endswith("\n")
    assert plain.out == text + "\n"
    assert plain.err.splitlines() == [f"chars 0-500 of {json.loads(exact.out)['total']}; next offset 500"]


def test_resume_counts_the_tool_calls_show_lists(paused: tuple[Path, str]) -> None:
    """`resume` says how many tool calls of the run were done, the number `show` lists, and the journal's."""
    work, sid = paused
    shown = agentrt("show", sid, cwd=work)
    listed = len(re.findall(r"^ +tool \w+ \[call_", shown.out, flags=re.M))
    pending = json.loads(agentrt("show", sid, "--json", cwd=work).out)["pending_approvals"][0]["interrupt_id"]
    ran = agentrt("resume", sid, "--approve", "--interrupt", pending, cwd=work)
    assert ran.code == 0, ran.both
    said = " ".join(ran.err.split())
    assert f"{listed} tool calls of this run already done as `show` lists them" in said, said
    journaled = int(re.search(r"\((\d+) in the tool journal", said).group(1))  # type: ignore[union-attr]
    todo_updates = len(re.findall(r"^ +tool update_todo \[", shown.out, flags=re.M))
    assert journaled == listed - todo_updates  # update_todo is state-only: never journaled


def test_a_yaml_error_keeps_its_line_and_column(tmp_path: Path) -> None:
    """A config with a YAML syntax error: exit 2, one line saying where (line, column, the text) and what."""
    config = tmp_path / "broken.yaml"
    config.write_text("model:\n  name: x\n name2: y\n")
    ran = agentrt("sessions", "--config", str(config), cwd=tmp_path)
    assert ran.code == 2, ran.both
    line = ran.error_line()
    assert f"config file {config} is not valid YAML: line 3, column 2: expected <block end>" in line, line
    assert "(while parsing a block mapping started at line 1, column 1), at 'name2: y'" in line, line
    assert not (tmp_path / ".agentrt").exists()


def test_serve_help_has_examples_and_says_who_the_caller_is(tmp_path: Path) -> None:
    """`agentrt serve --help` shows examples, and where tenant and user come from instead of --tenant."""
    ran = agentrt("serve", "--help", cwd=tmp_path)
    assert ran.code == 0, ran.both
    assert "example:\n  agentrt serve --config configs/default.yaml --port 8123\n" in ran.out
    assert "serve.api_keys" in ran.out and "--tenant" not in ran.out
