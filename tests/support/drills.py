"""How large the long drills run: a sample by default (what CI runs), all of it with
`AGENTRT_FULL_DRILLS=1`. Each drill's own variable (e.g. `AGENTRT_RACE_REPS`) still wins."""

from __future__ import annotations

import os

FULL = os.environ.get("AGENTRT_FULL_DRILLS") == "1"
"""Whether the full drills were asked for."""


def size(own_variable: str, sample: int, full: int) -> int:
    """The drill's size: `own_variable` when set, else `full` under AGENTRT_FULL_DRILLS=1, else `sample`."""
    given = os.environ.get(own_variable)
    return int(given) if given else (full if FULL else sample)


def switch(own_variable: str) -> bool:
    """A drill's all-or-sample switch: on with `own_variable=1` or AGENTRT_FULL_DRILLS=1."""
    return FULL or os.environ.get(own_variable) == "1"
