"""User tools for the crash drills: `bump` has an external side effect, `peek` only reads it.

The side-effect counter is a file OUTSIDE base_dir named by `AGENTRT_DRILL_COUNTER` (the drill
sets it per session run); each `bump` appends one line, so the file shows how often it really ran.
With `AGENTRT_DRILL_GATE=<path>` set, `bump` first creates `<path>.waiting` and blocks until
`<path>` exists: the lease drills use it to hold a process inside a run at a known point.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

COUNTER_ENV = "AGENTRT_DRILL_COUNTER"
GATE_ENV = "AGENTRT_DRILL_GATE"


def _counter() -> Path:
    path = os.environ.get(COUNTER_ENV)
    if not path:
        raise RuntimeError(f"set {COUNTER_ENV} to the side-effect counter file")
    return Path(path)


def bump(label: str) -> str:
    """Append one line to the external counter file (an unsafe side effect)."""
    path = _counter()
    gate = os.environ.get(GATE_ENV)
    if gate:
        Path(gate + ".waiting").touch()
        while not Path(gate).exists():
            time.sleep(0.02)
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


def peek_v2(label: str, verbose: bool = False) -> str:
    """`peek` with a changed argument schema (the recovery drills configure it under the name peek)."""
    return peek(label)
