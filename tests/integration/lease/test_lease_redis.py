"""RedisLease against the real Redis: one owner per session, fencing tokens, lapsed holders lose."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from agent.core.errors import BackendUnavailable, LeaseHeld
from agent.session.lease import LeaseHeartbeat
from agent.session.lease_redis import RedisLease
from agent.tools.journal import ToolExecutionJournal
from checkpointing.exceptions import StaleFencingTokenError
from checkpointing.fencing import FencingGuard

REPO = Path(__file__).resolve().parents[3]
REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
TENANT = "acme"


@pytest.fixture
def prefix() -> Iterator[str]:
    """A unique key prefix; every key under it is deleted afterwards."""
    value = f"test-lease-{uuid.uuid4().hex}:"
    yield value
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{value}*"))
    if keys:
        client.delete(*keys)


@pytest.fixture
def client() -> redis.Redis:
    """A raw Redis client for inspecting keys."""
    return redis.Redis.from_url(REDIS_URL)


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    """Start `code` in a fresh interpreter with line-based stdin/stdout."""
    env = dict(os.environ, PYTHONPATH=str(REPO), AGENTRT_REDIS_URL=REDIS_URL)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def send(proc: subprocess.Popen[str], line: str) -> str:
    """Send one command line and read one reply line."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def wait_until_gone(client: redis.Redis, key: str) -> None:
    """Block until `key` has expired, sleeping for the TTL Redis reports (bounded loop)."""
    for _ in range(200):
        pttl = int(client.pttl(key))
        if pttl == -2:
            return
        time.sleep(max(pttl, 5) / 1000)
    pytest.fail(f"{key} never expired")


RACER = """
    import json, sys
    from agent.core.errors import LeaseHeld
    from agent.session.lease_redis import RedisLease
    lease = RedisLease(key_prefix=sys.argv[1])
    lease.client.ping()
    print("ready", flush=True)
    sys.stdin.readline()
    grant = None
    try:
        grant = lease.acquire("acme", sys.argv[2], holder=sys.argv[3], ttl_s=60)
        print(json.dumps({"won": True, "token": grant.token, "holder": grant.holder}), flush=True)
    except LeaseHeld as err:
        print(json.dumps({"won": False, "holder": err.holder, "expires_at": err.expires_at}), flush=True)
    sys.stdin.readline()
    if grant is not None:
        lease.release(grant)
"""


@pytest.mark.parametrize("n", [2, 8])
def test_processes_racing_for_one_session_exactly_one_wins(prefix: str, client: redis.Redis, n: int) -> None:
    """N processes acquiring one session at once: one grant, the rest get LeaseHeld naming the winner."""
    procs = [spawn(RACER, prefix, "s-race", f"racer-{i}") for i in range(n)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results: list[dict[str, Any]] = []
        for p in procs:
            assert p.stdout is not None
            results.append(json.loads(p.stdout.readline()))
    finally:
        for p in procs:
            p.communicate(timeout=60)
    winners = [r for r in results if r["won"]]
    assert len(winners) == 1
    for loser in (r for r in results if not r["won"]):
        assert loser["holder"] == winners[0]["holder"]
        assert loser["expires_at"] is not None
    assert client.exists(RedisLease(key_prefix=prefix).lease_key(TENANT, "s-race")) == 0


def test_second_acquire_fails_at_once_and_release_frees_it(prefix: str) -> None:
    """A held session raises LeaseHeld for another holder; after release the next grant has a higher token."""
    lease = RedisLease(key_prefix=prefix)
    first = lease.acquire(TENANT, "s1", holder="host:1:a", ttl_s=30)
    with pytest.raises(LeaseHeld) as info:
        lease.acquire(TENANT, "s1", holder="host:2:b", ttl_s=30)
    assert info.value.holder == "host:1:a" and info.value.session_id == "s1"
    assert "host:1:a" in str(info.value)
    lease.release(first)
    second = lease.acquire(TENANT, "s1", holder="host:2:b", ttl_s=30)
    assert second.token > first.token
    lease.release(second)


def test_keys_carry_the_tenant(prefix: str, client: redis.Redis) -> None:
    """The same session id under two tenants is two independent leases with tenant-named keys."""
    lease = RedisLease(key_prefix=prefix)
    a = lease.acquire("tenant-a", "s1", ttl_s=30)
    b = lease.acquire("tenant-b", "s1", ttl_s=30)
    assert client.exists(f"{prefix}agentrt:tenant-a:lease:s1", f"{prefix}agentrt:tenant-b:lease:s1") == 2
    lease.release(a)
    lease.release(b)


def test_lapsed_holder_loses_to_a_new_holder_and_is_fenced(prefix: str, client: redis.Redis, tmp_path: Path) -> None:
    """Past its TTL the old grant is gone: a new holder gets a higher token and the old token is refused."""
    lease = RedisLease(key_prefix=prefix)
    old = lease.acquire(TENANT, "s1", holder="host:1:old", ttl_s=0.2)
    guard_old = FencingGuard.for_session(tmp_path, TENANT, "s1")
    guard_old.check_and_raise(old.token)
    wait_until_gone(client, lease.lease_key(TENANT, "s1"))
    new = lease.acquire(TENANT, "s1", holder="host:2:new", ttl_s=30)
    assert new.token > old.token
    FencingGuard.for_session(tmp_path, TENANT, "s1").check_and_raise(new.token)
    with pytest.raises(StaleFencingTokenError):
        guard_old.check_and_raise(old.token)
    with pytest.raises(LeaseHeld) as info:
        lease.extend(old)
    assert info.value.holder == "host:2:new"
    lease.release(old)
    assert lease.extend(new).token == new.token
    lease.release(new)


def test_lapsed_key_nobody_took_can_be_extended(prefix: str, client: redis.Redis) -> None:
    """A grant whose key lapsed with no newer grant is taken back by extend with the same token."""
    lease = RedisLease(key_prefix=prefix)
    grant = lease.acquire(TENANT, "s1", ttl_s=0.1)
    wait_until_gone(client, lease.lease_key(TENANT, "s1"))
    again = lease.extend(grant, ttl_s=30)
    assert again.token == grant.token
    with pytest.raises(LeaseHeld):
        lease.acquire(TENANT, "s1", ttl_s=30)
    lease.release(again)


def test_token_floor_keeps_tokens_above_the_fence(prefix: str) -> None:
    """token_floor (the fence's highest token, e.g. after Redis lost its data) lifts the next token."""
    lease = RedisLease(key_prefix=prefix)
    grant = lease.acquire(TENANT, "s1", ttl_s=30, token_floor=100)
    assert grant.token == 101
    lease.release(grant)
    assert lease.acquire(TENANT, "s1", ttl_s=30, token_floor=5).token == 102


def test_heartbeat_keeps_the_lease_past_its_ttl(prefix: str) -> None:
    """While the heartbeat runs, the lease outlives its TTL; stop() ends the thread."""
    lease = RedisLease(key_prefix=prefix)
    grant = lease.acquire(TENANT, "s1", ttl_s=0.3)
    with LeaseHeartbeat(lease, grant, interval_s=0.05) as hb:
        for _ in range(400):
            if hb.beats >= 10:
                break
            time.sleep(0.01)
        assert hb.beats >= 10
        with pytest.raises(LeaseHeld):
            lease.acquire(TENANT, "s1", ttl_s=30)
    assert not hb._thread.is_alive()
    assert hb.lost is None
    lease.release(hb.grant)


def test_heartbeat_reports_a_lost_lease(prefix: str, client: redis.Redis) -> None:
    """When another holder took over, the heartbeat stops, keeps LeaseHeld and calls on_lost."""
    lease = RedisLease(key_prefix=prefix)
    grant = lease.acquire(TENANT, "s1", ttl_s=30)
    client.delete(lease.lease_key(TENANT, "s1"))
    other = lease.acquire(TENANT, "s1", holder="host:9:thief", ttl_s=30)
    called: list[LeaseHeld] = []
    hb = LeaseHeartbeat(lease, grant, interval_s=0.01, on_lost=called.append).start()
    hb._thread.join(timeout=30)
    assert hb.lost is not None and hb.lost.holder == "host:9:thief"
    assert called == [hb.lost]
    lease.release(other)


def test_redis_down_is_a_storage_error() -> None:
    """An unreachable Redis raises BackendUnavailable that says what to check."""
    lease = RedisLease(url="redis://127.0.0.1:1/0")
    with pytest.raises(BackendUnavailable) as info:
        lease.acquire(TENANT, "s1", ttl_s=1)
    assert "AGENTRT_REDIS_URL" in str(info.value)


PAUSED_HOLDER = """
    import json, sys
    from agent.core.errors import LeaseHeld
    from agent.session.lease import LeaseHeartbeat
    from agent.session.lease_redis import RedisLease
    from agent.tools.journal import ToolExecutionJournal
    from checkpointing.exceptions import StaleFencingTokenError
    from checkpointing.fencing import FencingGuard
    base, prefix = sys.argv[1], sys.argv[2]
    lease = RedisLease(key_prefix=prefix)
    grant = lease.acquire("acme", "s1", holder="host:1:paused", ttl_s=0.5)
    hb = LeaseHeartbeat(lease, grant, interval_s=0.1).start()
    guard = FencingGuard.for_session(base, "acme", "s1")
    journal = ToolExecutionJournal(base, "acme", "s1", fencing=guard, token=grant.token)
    print(json.dumps({"token": grant.token}), flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "write":
            try:
                journal.record_intent("r1", arg, "send", {}, "unsafe")
                print("ok", flush=True)
            except StaleFencingTokenError:
                print("stale", flush=True)
        elif cmd == "extend":
            try:
                lease.extend(hb.grant)
                print("extended", flush=True)
            except LeaseHeld as err:
                print("lost:" + err.holder, flush=True)
"""


def test_holder_paused_past_its_ttl_cannot_write_after_takeover(
    prefix: str, client: redis.Redis, tmp_path: Path
) -> None:
    """SIGSTOP a holder past its TTL, take over, SIGCONT: its writes are refused and its lease is lost."""
    proc = spawn(PAUSED_HOLDER, str(tmp_path), prefix)
    try:
        assert proc.stdout is not None
        old_token = json.loads(proc.stdout.readline())["token"]
        assert send(proc, "write c-before") == "ok"
        os.kill(proc.pid, signal.SIGSTOP)
        wait_until_gone(client, RedisLease(key_prefix=prefix).lease_key(TENANT, "s1"))
        lease = RedisLease(key_prefix=prefix)
        new = lease.acquire(TENANT, "s1", holder="host:2:new", ttl_s=30)
        assert new.token > old_token
        guard = FencingGuard.for_session(tmp_path, TENANT, "s1")
        ToolExecutionJournal(tmp_path, TENANT, "s1", fencing=guard, token=new.token).record_intent(
            "r1", "c-new", "send", {}, "unsafe"
        )
        os.kill(proc.pid, signal.SIGCONT)
        assert send(proc, "write c-after") == "stale"
        assert send(proc, "extend") == "lost:host:2:new"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.communicate(timeout=60)
    calls = [r["tool_call_id"] for r in ToolExecutionJournal(tmp_path, TENANT, "s1").entries()]
    assert calls == ["c-before", "c-new"]
    lease.release(new)
