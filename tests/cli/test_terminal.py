"""`agentrt run` on a terminal (a pseudo-terminal): progress in order, the prompt, the answer once."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

from agent.cli.approval import describe, parse_answer
from tests.cli.console import agentrt, env, script

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _on_terminal(
    args: list[str], cwd: Path, answer: str, timeout: float = 300, raw: bool = False, **extra_env: str
) -> tuple[int, str]:
    """Run `agentrt ARGS` with stdin/stdout/stderr on a pty; type `answer` at the approval prompt.
    The output comes without its colour codes unless `raw`."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [script(), *args], cwd=cwd, env=env(TERM="xterm", **extra_env), stdin=slave, stdout=slave, stderr=slave
    )
    os.close(slave)
    out = b""
    answered = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        if not answered and b"[y/N]" in out:
            os.write(master, answer.encode() + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    proc.wait(timeout=30)
    os.close(master)
    text = out.decode("utf-8", "replace").replace("\r\n", "\n")
    return proc.returncode, text if raw else ANSI.sub("", text)


def test_terminal_run_rejects_with_a_reason_and_shows_progress_in_order(tmp_path: Path) -> None:
    """The prompt keeps `[y/N]` and the arguments; `n: reason` rejects; labels precede their events."""
    code, text = _on_terminal(["run", "--operator", "alice", "Summarise the sales"], tmp_path, "n: not before Monday")
    assert code == 0, text
    assert "Approve? [y/N]" in text
    assert 'publish_report({"path": "report.md", "channel": "team"})' in text
    # each node's label comes before that node's events
    assert text.index("▸ planning") < text.index("model call #1") < text.index("skill: data-analyst")
    assert text.index("▸ acting") < text.index("tool list_datasets [call_2_1]")
    assert re.search(r"tool query_dataset \[call_3_1\].*\n\s+-> success, 14744 chars, \d+ ms", text)
    assert "todo 1/4 done" in text and "✓ Look at the datasets" in text
    # the answer says the report was not published, and it is printed once
    assert text.count("it was NOT published") == 1, text
    assert "published to the team outbox" not in text
    sid = re.search(r"session (s-[0-9a-f]+)", text)
    assert sid
    shown = agentrt("show", sid.group(1), cwd=tmp_path)
    assert "approval rejected by alice (not before Monday): publish_report [call_6_1]" in shown.out, shown.out


def test_terminal_run_approves_with_y(tmp_path: Path) -> None:
    """`y` approves: the report is published and the answer says so."""
    code, text = _on_terminal(["run", "Summarise the sales"], tmp_path, "y")
    assert code == 0, text
    assert text.count("published to the team outbox") == 1, text


def test_quiet_prints_only_the_answer(tmp_path: Path) -> None:
    """--quiet: no progress lines; the pause and the command that answers it are still said."""
    ran = agentrt("run", "--quiet", "Summarise the sales", cwd=tmp_path)
    assert ran.code == 0
    assert "node " not in ran.err and "tool " not in ran.err
    assert "paused: approval " in ran.out and "--approve --interrupt " in ran.out
    assert "agentrt resume s-" in ran.err and "--reject" in ran.err


def test_plain_progress_without_a_terminal(tmp_path: Path) -> None:
    """Without a terminal: plain lines (no colour, no token stream) in order on stderr."""
    ran = agentrt("run", "--approve-all", "Summarise the sales", cwd=tmp_path)
    assert ran.code == 0
    assert "\x1b[" not in ran.err and "▸" not in ran.err
    lines = ran.err.splitlines()
    assert lines.index("node planning") < next(i for i, ln in enumerate(lines) if "model call #1" in ln)
    assert ran.out.count("Revenue by region for 2026") == 1


def test_the_prompt_masks_secrets_and_reads_answers() -> None:
    """Secret-looking arguments are masked; y / n / `n: reason` / empty parse as documented."""
    text = describe({"name": "deploy", "args": {"api_key": "sk-live-123", "url": "postgresql://u:hunter2@db/x"}})
    assert "sk-live-123" not in text and "hunter2" not in text and text.startswith("deploy(")
    assert parse_answer("y") == {"approved": True}
    assert parse_answer("YES") == {"approved": True}
    assert parse_answer("n") == {"approved": False, "reason": "rejected at the prompt"}
    assert parse_answer("") == {"approved": False, "reason": "rejected at the prompt"}
    assert parse_answer("n: not before Monday") == {"approved": False, "reason": "not before Monday"}
    assert parse_answer(None)["approved"] is False


def test_scripted_variant_looks_at_this_turn_only() -> None:
    """A variant reacts to words after the last user message, not to an earlier turn's."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from agent.loop.models import ScriptedResponse

    resp = ScriptedResponse.model_validate(
        {"content": "published", "instead_if_prompt_has": [{"text": "rejected by", "content": "not published"}]}
    )
    rejected = ToolMessage(content="rejected by the human reviewer: no", tool_call_id="c1")
    call = AIMessage(content="", tool_calls=[{"id": "c1", "name": "publish_report", "args": {}}])
    now = [SystemMessage("s"), HumanMessage("publish"), call, rejected]
    assert resp.for_prompt(now).content == "not published"
    approved = ToolMessage(content="ok", tool_call_id="c1")
    later = [*now, AIMessage("not published"), HumanMessage("again"), call, approved]
    assert resp.for_prompt(later).content == "published"


def test_no_color_turns_the_colours_off_and_changes_nothing_else(tmp_path: Path) -> None:
    """On a terminal the progress is coloured; with NO_COLOR set (no-color.org) the same text comes plain."""
    args = ["run", "--approve-all", "--new-session", "s-colour", "Summarise the sales"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    code, coloured = _on_terminal(args, tmp_path / "a", "", raw=True)
    assert code == 0 and ANSI.search(coloured), coloured
    code, plain = _on_terminal([*args[:3], "s-plain", args[4]], tmp_path / "b", "", raw=True, NO_COLOR="1")
    assert code == 0 and not ANSI.search(plain), plain
    no_ms = re.compile(r"\d+ ms|r-[0-9a-f]{12}")  # durations and run ids differ between runs
    assert no_ms.sub("", ANSI.sub("", coloured)).replace("s-colour", "ID") == no_ms.sub("", plain).replace(
        "s-plain", "ID"
    )
