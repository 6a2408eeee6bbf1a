"""FileLease (processes of one host) and InProcessLease (threads of one process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.core.errors import LeaseHeld
from agent.session.lease import InProcessLease, LeaseGrant, LeaseHeartbeat, make_holder
from agent.session.lease_file import FileLease
from checkpointing.exceptions import InvalidIdError

REPO = Path(__file__).resolve().parents[3]
TENANT = "acme"


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    """Start `code` in a fresh interpreter with line-based stdin/stdout."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


RACER = """
    import json, os, sys
    from agent.core.errors import LeaseHeld
    from agent.session.lease_file import FileLease
    lease = FileLease(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        grant = lease.acquire("acme", "s1", holder=sys.argv[2], ttl_s=60)
        print(json.dumps({"won": True, "token": grant.token, "holder": grant.holder}), flush=True)
    except LeaseHeld as err:
        print(json.dumps({"won": False, "holder": err.holder, "expires_at": err.expires_at}), flush=True)
    sys.stdin.readline()
    os._exit(0)  # like a crash: no release, the kernel drops the lock with the process
"""


def race(base: Path, n: int) -> list[dict[str, Any]]:
    """Let `n` processes acquire one session at once; returns what each got (all have exited)."""
    procs = [spawn(RACER, str(base), f"racer-{i}") for i in range(n)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            assert p.stdout is not None
            results.append(json.loads(p.stdout.readline()))
        return results
    finally:
        for p in procs:
            p.communicate(timeout=60)


@pytest.mark.parametrize("n", [2, 8])
def test_file_lease_processes_racing_exactly_one_wins(tmp_path: Path, n: int) -> None:
    """N processes on one host: one grant, the others get LeaseHeld naming the winner."""
    results = race(tmp_path, n)
    winners = [r for r in results if r["won"]]
    assert len(winners) == 1
    assert all(r["holder"] == winners[0]["holder"] for r in results if not r["won"])


def test_file_lease_is_freed_when_the_holder_dies(tmp_path: Path) -> None:
    """A held session refuses others, naming the holder; once it is killed, a higher token is granted."""
    holder = spawn(RACER, str(tmp_path), "host:1:child")
    assert holder.stdin is not None and holder.stdout is not None
    assert holder.stdout.readline().strip() == "ready"
    holder.stdin.write("go\n")
    holder.stdin.flush()
    child = json.loads(holder.stdout.readline())
    assert child["won"]
    lease = FileLease(tmp_path)
    with pytest.raises(LeaseHeld) as info:
        lease.acquire(TENANT, "s1", holder="host:2:me", ttl_s=30)
    assert info.value.holder == "host:1:child" and info.value.expires_at is not None
    holder.kill()
    holder.communicate(timeout=60)
    grant = lease.acquire(TENANT, "s1", holder="host:2:me", ttl_s=30)
    assert grant.token > child["token"]
    lease.release(grant)


def test_file_lease_two_objects_in_one_process(tmp_path: Path) -> None:
    """The flock also separates two FileLease objects of one process; release hands it over."""
    a, b = FileLease(tmp_path), FileLease(tmp_path)
    first = a.acquire(TENANT, "s1", holder="one", ttl_s=30)
    with pytest.raises(LeaseHeld) as info:
        b.acquire(TENANT, "s1", holder="two", ttl_s=30)
    assert info.value.holder == "one"
    a.release(first)
    second = b.acquire(TENANT, "s1", holder="two", ttl_s=30)
    assert second.token == first.token + 1
    b.release(second)


def test_file_lease_records_holder_and_expiry(tmp_path: Path) -> None:
    """lease.json names holder, token and expiry; extend moves the expiry; release removes it."""
    lease = FileLease(tmp_path)
    grant = lease.acquire(TENANT, "s1", holder="me", ttl_s=30)
    path = tmp_path / "tenants" / TENANT / "sessions" / "s1" / "lease.json"
    doc = json.loads(path.read_text())
    assert doc["holder"] == "me" and doc["token"] == grant.token
    longer = lease.extend(grant, ttl_s=3600)
    assert json.loads(path.read_text())["expires_at"] == longer.expires_at > grant.expires_at
    lease.release(longer)
    assert not path.exists()
    with pytest.raises(LeaseHeld):
        lease.extend(longer)


def test_file_lease_token_floor(tmp_path: Path) -> None:
    """token_floor lifts the next token above a fence that is ahead of the counter file."""
    lease = FileLease(tmp_path)
    grant = lease.acquire(TENANT, "s1", ttl_s=30, token_floor=41)
    assert grant.token == 42
    lease.release(grant)


def test_ids_are_validated(tmp_path: Path) -> None:
    """A session id that would escape the tenant directory is refused before any file is made."""
    with pytest.raises(InvalidIdError):
        FileLease(tmp_path).acquire(TENANT, "../x", ttl_s=30)
    assert not (tmp_path / "tenants").exists()


def test_holder_string_names_host_and_pid() -> None:
    """make_holder() is host:pid:uuid and unique per call."""
    a, b = make_holder(), make_holder()
    assert a != b and a.split(":")[1] == str(os.getpid()) and len(a.split(":")) == 3


def test_in_process_second_acquire_fails_and_release_frees() -> None:
    """InProcessLease: held -> LeaseHeld with holder and expiry; after release, a higher token."""
    lease = InProcessLease(registry={})
    first = lease.acquire(TENANT, "s1", holder="one", ttl_s=30)
    with pytest.raises(LeaseHeld) as info:
        lease.acquire(TENANT, "s1", holder="two", ttl_s=30)
    assert info.value.holder == "one" and info.value.expires_at == first.expires_at
    lease.release(first)
    assert lease.acquire(TENANT, "s1", holder="two", ttl_s=30).token > first.token


def test_in_process_instances_share_one_registry() -> None:
    """Two default InProcessLease objects see each other's grants (one process, one registry)."""
    session = f"s-{os.getpid()}-{threading.get_ident()}"
    grant = InProcessLease().acquire(TENANT, session, ttl_s=30)
    try:
        with pytest.raises(LeaseHeld):
            InProcessLease().acquire(TENANT, session, ttl_s=30)
    finally:
        InProcessLease().release(grant)


def test_in_process_expired_grant_is_taken_over() -> None:
    """A grant past its TTL is replaced by a new holder; the old holder can no longer extend."""
    lease = InProcessLease(registry={})
    old = lease.acquire(TENANT, "s1", holder="old", ttl_s=0.01)
    while time.time() <= old.expires_at:
        time.sleep(0.005)
    new = lease.acquire(TENANT, "s1", holder="new", ttl_s=30)
    assert new.token > old.token
    with pytest.raises(LeaseHeld) as info:
        lease.extend(old)
    assert info.value.holder == "new"
    lease.release(old)
    assert lease.extend(new).holder == "new"


def test_in_process_threads_racing_exactly_one_wins() -> None:
    """Eight threads acquiring one session at once: exactly one grant."""
    lease = InProcessLease(registry={})
    barrier = threading.Barrier(8)
    grants: list[LeaseGrant] = []
    refused: list[LeaseHeld] = []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            grants.append(lease.acquire(TENANT, "s1", holder=f"t{i}", ttl_s=30))
        except LeaseHeld as err:
            refused.append(err)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(grants) == 1 and len(refused) == 7
    assert {e.holder for e in refused} == {grants[0].holder}


def test_heartbeat_extends_a_file_lease(tmp_path: Path) -> None:
    """The heartbeat moves the recorded expiry forward and stops cleanly."""
    lease = FileLease(tmp_path)
    grant = lease.acquire(TENANT, "s1", ttl_s=0.3)
    with LeaseHeartbeat(lease, grant, interval_s=0.01) as hb:
        for _ in range(500):
            if hb.beats >= 3:
                break
            time.sleep(0.01)
    assert hb.beats >= 3 and hb.lost is None
    assert hb.grant.expires_at > grant.expires_at
    lease.release(hb.grant)
