"""User tools for the `agentrt serve` tests: a slow, read-only step to cancel or crash a run in."""

from __future__ import annotations

import time


def nap(seconds: float) -> str:
    """Sleep, then say so (read-only: safe to re-run after a crash)."""
    time.sleep(seconds)
    return f"rested {seconds}s"
