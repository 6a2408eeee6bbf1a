"""User tools for the crash drills: `bump` has an external side effect, `peek` only reads it.

The side-effect counter is a file OUTSIDE base_dir named by `AGENTRT_DRILL_COUNTER` (the drill
sets it per session run); each `bump` appends one line, so the file shows how often it really ran.
"""

from __future__ import annotations

import os
from pathlib import Path

COUNTER_ENV = "AGENTRT_DRILL_COUNTER"


def _counter() -> Path:
    path = os.environ.get(COUNTER_ENV)
    if not path:
        raise RuntimeError(f"set {COUNTER_ENV} to the side-effect counter file")
    return Path(path)


def bump(label: str) -> str:
    """Append one line to the external counter file (an unsafe side effect)."""
    path = _counter()
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(label + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return f"bumped {label}"


def peek(label: str) -> str:
    """Report how many times `label` was bumped so far (read-only)."""
    path = _counter()
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return f"{label}: {'present' if label in lines else 'absent'}"
