"""User tools for the two-worker drill, loaded by import path in worker processes.

Both keep their evidence in Redis under `AGENTRT_TEST_KEYS` (a per-test prefix):
`bump` is an unsafe side effect that counts its executions per session; `gate` (read-only) blocks
while `<prefix>:gate:<session>` exists, after saying which process reached it, so a test can kill
that worker mid-run at a known step without timing guesses.
"""

from __future__ import annotations

import os
import time

import redis

from agent.tools.base import ToolContext

GATE_BOUND_S = 120.0


def _client() -> tuple[redis.Redis, str]:
    url = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
    return redis.Redis.from_url(url), os.environ["AGENTRT_TEST_KEYS"]


def bump(ctx: ToolContext, note: str) -> str:
    """Count one execution of this session's side effect (never safe to repeat)."""
    r, prefix = _client()
    n = r.incr(f"{prefix}:bump:{ctx.session_id}")
    return f"bumped {note}: {n}"


def gate(ctx: ToolContext) -> str:
    """Wait while the session's gate is closed (a bounded wait); report which process passed."""
    r, prefix = _client()
    key = f"{prefix}:gate:{ctx.session_id}"
    if r.exists(key):
        r.set(f"{prefix}:reached:{ctx.session_id}", os.getpid())
        deadline = time.monotonic() + GATE_BOUND_S
        while r.exists(key) and time.monotonic() < deadline:
            time.sleep(0.05)
    return f"gate passed by {os.getpid()}"
