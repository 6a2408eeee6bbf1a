"""Every shell command in README.md's code blocks runs as written, in a fresh directory.

Commands run in README order with the installed `agentrt`, sharing one working directory (so the
session the first `run` creates is the `ID` of the next ones). Placeholders: `ID` is the newest
session a plain `run` created, `ENTRY` its last answer's entry, `CALL_ID` its first large tool
result, `IID` its pending approval's id, `BRANCH` its newest branch but the current one. Each
command must exit 0 and print its key line. A command that can not run offline here is listed in
SKIPPED with the reason; any other unknown command fails the suite.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from tests.cli.console import ROOT, agentrt

SKIPPED = {
    "pip install": "would reinstall the shared environment; the tests use the installed script",
    "scripts/test": "runs this very suite",
    "agentrt db init --config configs/production.yaml": "needs PostgreSQL: tests/cli/test_configs_run.py runs it",
    "agentrt submit": "needs running Celery workers: tests/integration/workers/test_workers.py submits and waits",
    "agentrt wait": "needs running Celery workers: tests/integration/workers/test_workers.py submits and waits",
    "AGENTRT_CONFIG=": "starts a Celery worker, a long-running process: tests/integration/workers/test_workers.py",
    "celery ": "a Celery worker or its inspection: tests/integration/workers/test_workers.py",
    "agentrt serve": "a server that runs until stopped: tests/integration/serve/test_serve_api.py",
    "redis-cli": "writes to the shared Redis queue: tests/integration/workers/test_workers.py covers it",
    "export ": "environment for `langgraph dev`, a server: tests/integration/test_studio.py runs it",
    "langgraph dev": "a server: tests/integration/test_studio.py runs it",
    "scripts/langgraph-suite": (
        "downloads LangGraph's own tests (pip download) and runs ~1,300 of them for tens of minutes: "
        "a by-hand check whose counts the README gives"
    ),
    "python bench/": "benchmarks that take minutes and print figures (no pass/fail)",
    "python -m agent.loop.local_llm": "a local model server (local-llm extra): tests/cli/test_configs_run.py runs it",
    "python -m llama_cpp.server": "a local model server (local-llm extra): tests/cli/test_configs_run.py runs it",
    "agentrt run --config configs/local-llm.yaml": "needs that server: tests/cli/test_configs_run.py runs the config",
}

# subcommand -> the line its output must contain (a regex over stdout + stderr)
KEY_LINE = {
    "run": r"session s-[0-9a-f]+|\"session_id\": \"s-",
    "resume": r"status COMPLETED",
    "sessions": r"SESSION +STATUS +BRANCHES +TURNS",
    "show": r"conversation \(branch main\)",
    "fork": r"branch \S+ starts at entry",
    "branches": r"BRANCH +NAME +FROM ENTRY +HEAD ENTRY",
    "switch": r"is on branch \S+",
    "branch": r"is named NAME$|deleted; its entries stay",
    "tool-result": r"chars 0-500 of \d+",
    "doctor": r"agentrt doctor: (session s-|the session store)",
    "pause": r"is PAUSED",
    "end": r"is ENDED",
    "db": r"sqlite:.*schema revision",
    "erase": r"^would delete default/s-|^nothing to erase",
    "store": r"retention_days is not set|^would delete",
    "completion": r"complete .*-F _shtab_agentrt agentrt",
    "--version": r"^agentrt \d",
}


def readme_commands() -> list[str]:
    """Every command line of the README's bash blocks (comments dropped, `a && b` split)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for raw in block.replace("\\\n", " ").splitlines():  # join continued lines
            line = re.split(r"\s{2,}#|^#", raw, maxsplit=1)[0].strip()
            out += [part.strip() for part in line.split(" && ") if part.strip()]
    return out


def _skip_reason(cmd: str) -> str | None:
    return next((why for prefix, why in SKIPPED.items() if cmd.startswith(prefix)), None)


def test_every_readme_command_is_run_or_skipped_with_a_reason() -> None:
    """No command in the README escapes the suite: each is runnable here or skipped for a stated reason."""
    cmds = readme_commands()
    assert any(c.startswith("agentrt run") for c in cmds)
    for cmd in cmds:
        if _skip_reason(cmd) is None:
            words = shlex.split(cmd)
            assert words[0] == "agentrt", f"README command neither runnable nor skipped: {cmd}"
            sub = next((w for w in words[1:] if w in KEY_LINE), None)
            assert sub is not None, f"no key line known for README command: {cmd}"


class _Ids:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.session: str | None = None

    def entries(self) -> list[dict[str, object]]:
        assert self.session, "a README command uses ID before any `agentrt run` made a session"
        shown = agentrt("show", self.session, "--json", "--last", "1000", cwd=self.work)
        assert shown.code == 0, shown.both
        entries: list[dict[str, object]] = json.loads(shown.out)["entries"]
        return entries

    def fill(self, words: list[str]) -> list[str]:
        out = []
        for w in words:
            if w == "ID":
                assert self.session
                w = self.session
            elif w == "ENTRY":
                w = str([e["id"] for e in self.entries() if e["type"] == "assistant_message"][-1])
            elif w == "IID":
                assert self.session
                shown = agentrt("show", self.session, "--json", cwd=self.work)
                w = str(json.loads(shown.out)["pending_approvals"][0]["interrupt_id"])
            elif w == "BRANCH":  # the newest branch that is not the current one
                assert self.session
                listed = json.loads(agentrt("branches", self.session, "--json", cwd=self.work).out)
                w = str([b["branch_id"] for b in listed if not b["current"]][-1])
            elif w == "CALL_ID":
                summaries = [str(e["summary"]) for e in self.entries() if e["type"] == "tool_call"]
                w = next(m.group(1) for s in summaries if (m := re.search(r'"tool_call_id": "([^"]+)"', s)))
            out.append(w)
        return out


def test_readme_commands_run(tmp_path: Path) -> None:
    """The README's commands, in order, from a fresh directory: exit 0 and the key line each."""
    ids = _Ids(tmp_path)
    ran_any = 0
    for cmd in readme_commands():
        if _skip_reason(cmd) is not None:
            continue
        words = ids.fill(shlex.split(cmd))
        result = agentrt(*words[1:], cwd=tmp_path)
        assert result.code == 0, f"`{cmd}` exited {result.code}:\n{result.both}"
        sub = next(w for w in shlex.split(cmd)[1:] if w in KEY_LINE)
        assert re.search(KEY_LINE[sub], result.both, flags=re.M), f"`{cmd}` lacks /{KEY_LINE[sub]}/:\n{result.both}"
        if sub == "run" and "--session" not in words:
            found = re.search(r"(?:session |\"session_id\": \")(s-[0-9a-f]+)", result.both)
            assert found
            ids.session = found.group(1)
        ran_any += 1
    assert ran_any >= 5  # the set-up's run and the tour; the docs' examples: tests/docs/test_docs_blocks.py
