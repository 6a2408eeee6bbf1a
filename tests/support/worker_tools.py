"""User tools for the Celery worker drills and benchmark, loaded by import path in worker processes.

Evidence goes to Redis under `AGENTRT_TEST_KEYS` (a per-test prefix):
`bump` is an unsafe side effect that counts its executions per session and per run; `gate`
(read-only) blocks while `<prefix>:gate:<session>` exists, after saying which process reached it,
so a test can stop a worker mid-run at a known step; `nap` (read-only) sleeps 200 ms, a stand-in
for a tool that waits on I/O.
"""

from __future__ import annotations

import os
import time

import redis

from agent.core.tool_spec import ToolContext

GATE_BOUND_S = 120.0
NAP_S = 0.2
_clients: dict[str, redis.Redis] = {}


def _client() -> tuple[redis.Redis, str]:
    url = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url)
    return _clients[url], os.environ["AGENTRT_TEST_KEYS"]


def bump(ctx: ToolContext, note: str) -> str:
    """Count one execution of this session's side effect (never safe to repeat)."""
    r, prefix = _client()
    pipe = r.pipeline()
    pipe.incr(f"{prefix}:bump:{ctx.session_id}")
    pipe.incr(f"{prefix}:bump-run:{ctx.run_id}")
    pipe.rpush(f"{prefix}:runs:{ctx.session_id}", ctx.run_id)
    n = pipe.execute()[0]
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


def nap(ctx: ToolContext) -> str:
    """Sleep 200 ms (read-only)."""
    time.sleep(NAP_S)
    return "rested"
