"""Every repository file that README.md, a docstring, or a comment of a shipped config names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.cli.console import ROOT

TOP = ("agent", "graph", "nodes", "checkpointing", "configs", "tests", "bench", "docs", "scripts", ".ci")
# a path inside the repository: starts at a top-level folder, or is a known top-level file
PATH = re.compile(
    r"(?<![\w./<{$-])((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]*[\w/]"
    r"|pyproject\.toml|langgraph\.json|README\.md)"
)
SOURCES = ("agent", "graph", "nodes", "checkpointing", "bench", "scripts")


def _named_paths(text: str) -> set[str]:
    found = set()
    text = text.replace("builtin:", "agent/assets/")  # a config's name for a shipped file
    for m in PATH.finditer(text):
        path = m.group(1).rstrip("/.")
        end = m.end()
        if end < len(text) and text[end] in "<{*":  # a pattern such as configs/skills/<name>.yaml
            continue
        named = m.group(1).endswith("/") or "." in path.rsplit("/", 1)[-1] or path.startswith(("scripts/", ".ci/"))
        if not named:  # prose such as "agent/document types", not a file
            continue
        found.add(path)
    return found


def _docstrings(path: Path) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return "\n".join(doc for n in nodes if (doc := ast.get_docstring(n)))


def _texts() -> dict[str, str]:
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for folder in SOURCES:
        for py in sorted((ROOT / folder).rglob("*.py")):
            texts[str(py.relative_to(ROOT))] = _docstrings(py)
    for cfg in sorted((ROOT / "configs").rglob("*.yaml")):
        comments = [ln.split("#", 1)[1] for ln in cfg.read_text(encoding="utf-8").splitlines() if "#" in ln]
        texts[str(cfg.relative_to(ROOT))] = "\n".join(comments)
    docs = ROOT / "docs"
    for md in sorted(docs.rglob("*.md")) if docs.is_dir() else []:
        texts[str(md.relative_to(ROOT))] = md.read_text(encoding="utf-8")
    return texts


def test_referenced_files_exist() -> None:
    """A path named in the README, a docstring, a config comment or docs/ is in the repository
    (a config's comments may name paths relative to its own folder, as its settings do)."""
    missing = sorted(
        f"{source}: {path}"
        for source, text in _texts().items()
        for path in _named_paths(text)
        if not (ROOT / path).exists() and not (ROOT / source).parent.joinpath(path).exists()
    )
    assert not missing, "referenced but missing:\n" + "\n".join(missing)


def test_the_pattern_finds_paths() -> None:
    """The extractor sees plain paths and skips patterns."""
    assert _named_paths("see docs/production.md and `configs/skills/<name>.yaml`, agent/loop/models.py.") == {
        "docs/production.md",
        "agent/loop/models.py",
    }
    assert _named_paths("script: builtin:scripts/demo.yaml") == {"agent/assets/scripts/demo.yaml"}
