"""The runnable examples of the docs: every ```bash / ```shell / ```python block of a page, or a norun mark.

A block is marked not to run by an HTML comment on the line right before its fence:
`<!-- norun: why -->` (docs/development/docs.md says so to writers). `text`, `yaml` and other
blocks are output or configuration and are never collected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUNNABLE = ("bash", "shell", "python")
FENCE = re.compile(r"^(`{3,})([\w-]*)[^\n]*$")
NORUN = re.compile(r"^<!--\s*norun:\s*(.*?)\s*-->$")


@dataclass
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    norun: str | None  # the reason given, "" for a mark without one, None when it runs

    def where(self) -> str:
        """`page:line` for messages."""
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The bash / shell / python blocks of a Markdown page, in order (blocks nested in a longer
    fence, such as an example of the syntax itself, are part of that fence and not collected)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, lang = m.group(1), m.group(2)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), len(lines))
        if lang in RUNNABLE:
            prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mark = NORUN.match(prev)
            out.append(Block(page, i + 1, lang, "\n".join(lines[i + 1 : end]) + "\n", mark.group(1) if mark else None))
        i = end + 1
    return out


def shell_commands(code: str) -> list[str]:
    """The command lines of a shell block: `\\` continues a line, `#` starts a comment."""
    out = []
    for raw in code.replace("\\\n", " ").splitlines():
        line = re.split(r"\s+#|^#", raw, maxsplit=1)[0].strip()
        if line:
            out.append(line)
    return out
