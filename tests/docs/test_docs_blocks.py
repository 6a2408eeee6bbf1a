"""Every ```bash / ```shell / ```python block of the docs runs, against the installed `agentrt`.

Each page gets a fresh folder holding a copy of the repository's `configs/`; its blocks run there in
page order with the console script and PYTHONPATH=ROOT (this checkout's code). Shell blocks run line
by line (each must exit 0); the words ID, ENTRY, IID, BRANCH and CALL_ID become the real ids of the
newest session a plain `agentrt run` made (tests/cli/test_readme_commands.py's rules). A block marked
`<!-- norun: why -->` is counted, not run (tests/support/doc_blocks.py); the counts are printed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.console import ROOT, env
from tests.cli.test_readme_commands import _Ids
from tests.support.doc_blocks import Block, blocks, shell_commands

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
RUNNABLE_PAGES = [p for p in PAGES if any(b.norun is None for b in blocks(p))]
PLACEHOLDER = re.compile(r"(?<![\w-])(ID|ENTRY|IID|BRANCH|CALL_ID)(?![\w-])")
SESSION = re.compile(r"(?:session |\"session_id\": \")(s-[0-9a-f]+)")


def _all_blocks() -> list[Block]:
    return [b for p in PAGES for b in blocks(p)]


def test_every_block_runs_or_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    """A norun mark gives its reason; the counts of run and marked blocks are printed."""
    found = _all_blocks()
    marked = [b for b in found if b.norun is not None]
    assert all(b.norun for b in marked), [b.where() for b in marked if not b.norun]
    ran = len(found) - len(marked)
    assert ran >= 8 and RUNNABLE_PAGES
    with capsys.disabled():
        print(f"\ndocs examples: {ran} blocks run, {len(marked)} marked norun, in {len(PAGES)} pages")
        for b in marked:
            print(f"  norun {b.where()}: {b.norun}")


def _fill(line: str, ids: _Ids) -> str:
    return PLACEHOLDER.sub(lambda m: ids.fill([m.group(1)])[0], line)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env(), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=[str(p.relative_to(DOCS)) for p in RUNNABLE_PAGES])
def test_page_examples_run(page: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The page's unmarked blocks, in order, in one fresh folder: every command exits 0."""
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    ids = _Ids(tmp_path)
    ran = marked = 0
    for block in blocks(page):
        if block.norun is not None:
            marked += 1
            continue
        if block.lang == "python":
            script = tmp_path / f"block_{block.line}.py"
            script.write_text(block.code, encoding="utf-8")
            done = _run([sys.executable, str(script)], tmp_path)
            assert done.returncode == 0, f"{block.where()} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        else:
            for cmd in shell_commands(block.code):
                line = _fill(cmd, ids)
                done = _run(["bash", "-c", line], tmp_path)
                both = done.stdout + done.stderr
                assert done.returncode == 0, f"{block.where()}: `{line}` exited {done.returncode}:\n{both}"
                if cmd.startswith("agentrt run") and "--session" not in cmd:
                    found = SESSION.search(both)
                    assert found, f"{block.where()}: `{line}` names no session:\n{both}"
                    ids.session = found.group(1)
        ran += 1
    with capsys.disabled():
        print(f"\n{page.relative_to(DOCS)}: {ran} blocks run, {marked} marked norun")
    assert ran >= 1
