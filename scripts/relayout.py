"""Rewrite imports from the flat agent/ layout to the grouped one (issue 13, DESIGN.md section 2).

Idempotent: moves a module only when its old file still exists (git mv), then rewrites every
dotted reference in .py/.md/.toml files under the repository. Kept for branches made before the
regroup: run `python scripts/relayout.py` after rebasing one.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MOVES: dict[str, str] = {
    "agent.manager": "agent.session.manager",
    "agent.stores": "agent.session.stores",
    "agent.chat_memory": "agent.session.chat_memory",
    "agent.lease": "agent.session.lease",
    "agent.runtime_builder": "agent.run.builder",
    "agent.runtime": "agent.loop.runtime",
    "agent.models": "agent.loop.models",
    "agent.context": "agent.loop.context_manager",
    "agent.compression": "agent.loop.compression",
    "agent.tokens": "agent.loop.token_count",
    "agent.tool_pairs": "agent.loop.tool_pairs",
    "agent.tool_results": "agent.tools.tool_results",
    "agent.skills": "agent.loop.skills",
    "agent.todos": "agent.loop.todos",
    "agent.surface": "agent.loop.surface",
    "agent.sandbox_paths": "agent.tools.sandbox.paths",
    "agent.sandbox": "agent.tools.sandbox.room",
    "agent.dataset_loaders": "agent.tools.datasets.loaders",
    "agent.datasets": "agent.tools.datasets.dataset_registry",
    "agent.doctor_checks": "agent.doctor.checks",
    "agent.doctor_files": "agent.doctor.storage_checks",
}
SESSION_CHILDREN = "session|manager|stores|chat_memory|lease|lifecycle|outbox|migrations|inbox|layers|db_cli"


def _path(dotted: str) -> Path:
    p = ROOT / Path(*dotted.split("."))
    return p if p.is_dir() else p.with_suffix(".py")


def move_files() -> None:
    for old, new in MOVES.items():
        src, dst = _path(old), ROOT / Path(*new.split("."))
        if not src.exists():
            continue
        if src.suffix == ".py":
            dst = dst.with_suffix(".py")
        dst.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)
    if (ROOT / "agent/session.py").exists():
        (ROOT / "agent/session").mkdir(exist_ok=True)
        subprocess.run(["git", "mv", "agent/session.py", "agent/session/session.py"], cwd=ROOT, check=True)
    if (ROOT / "agent/doctor.py").exists():
        (ROOT / "agent/doctor").mkdir(exist_ok=True)
        subprocess.run(["git", "mv", "agent/doctor.py", "agent/doctor/facts.py"], cwd=ROOT, check=True)


def rewrite(text: str) -> str:
    for old, new in MOVES.items():
        mod = old.split(".", 1)[1]
        text = re.sub(rf"(?<![\w.]){re.escape(old)}\b", new, text)
        new_pkg, new_mod = new.rsplit(".", 1)
        text = re.sub(
            rf"^(\s*)from agent import {mod}\b(?! as)", rf"\1from {new_pkg} import {new_mod} as {mod}", text, flags=re.M
        )
        text = re.sub(rf"^(\s*)import {re.escape(new)} as (\w+)", rf"\1import {new} as \2", text, flags=re.M)
        text = text.replace(f"{old.replace('.', '/')}.py", f"{new.replace('.', '/')}.py")
    text = re.sub(rf"(?<![\w.])agent\.session\b(?!\.({SESSION_CHILDREN})\b)", "agent.session.session", text)
    text = re.sub(r"(?<![\w.])agent\.doctor\b(?!\.(facts|checks|files|report)\b)(?=\.\w)", "agent.doctor.facts", text)
    text = text.replace("agent/session.py", "agent/session/session.py").replace("agent/doctor.py", "agent/doctor/")
    return text


def main() -> int:
    move_files()
    changed = 0
    for path in ROOT.rglob("*"):
        if path.suffix not in (".py", ".md", ".toml") or ".git" in path.parts or path.name == "relayout.py":
            continue
        if any(part in (".agentrt", ".venv", "node_modules") for part in path.parts):
            continue
        old = path.read_text(encoding="utf-8")
        new = rewrite(old)
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed += 1
    print(f"relayout: {changed} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
