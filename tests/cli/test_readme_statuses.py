"""The session statuses of the README and of the lifecycle page are the `SessionStatus` enum, and no figure
is glued into a word."""

from __future__ import annotations

import re

from agent.core.statuses import SessionStatus
from tests.cli.console import ROOT
from tests.cli.test_references import _texts

README = (ROOT / "README.md").read_text(encoding="utf-8")
LIFECYCLE = (ROOT / "docs" / "concepts" / "lifecycle.md").read_text(encoding="utf-8")
STATUSES = [s.value for s in SessionStatus]
# a figure replacing letters of a word: "1.07IRED" (EXPIRED), "2.5ECT"; not "12.8 tokens/s" or "x2.3"
GLUED = re.compile(r"(?<![\w.])\d+\.\d+[A-Z]{2,}\w*|\b[A-Z]{2,}\d+\.\d+[A-Z]+\w*")


def test_first_paragraph_lists_every_session_status() -> None:
    """The session bullet of the README's opening names the statuses, in the enum's order."""
    bullet = next(ln for ln in README.splitlines() if "**The business session**" in ln)
    listed = re.search(r"\b([A-Z0-9.]+(?:/[A-Z0-9.]+)+)\b", bullet)
    assert listed is not None, bullet
    assert listed.group(1).split("/") == STATUSES


def test_lifecycle_table_has_one_row_per_status() -> None:
    """The lifecycle page's table: its rows are the enum's statuses, and every cell is one of them or blank."""
    table = LIFECYCLE.split("| from \\ action |", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in table.splitlines()[2:]]
    assert [r[0] for r in rows] == STATUSES
    assert {c for r in rows for c in r if c} <= set(STATUSES)


def test_no_figure_glued_into_a_word() -> None:
    """A search-replace that put a number in place of letters shows as digits fused to capitals."""
    damaged = [f"{source}: {m.group(0)}" for source, text in _texts().items() for m in GLUED.finditer(text)]
    assert not damaged, "damaged words:\n" + "\n".join(damaged)
    assert GLUED.search("ACTIVE/PAUSED/ENDED/1.07IRED") and not GLUED.search("12.8 tokens/s, x2.3, qwen2.5-7b")
