"""The file lease's files are not fsynced: what a machine crash can leave of them still works."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import LeaseHeld
from agent.session.lease import FileLease
from checkpointing.fencing import FencingGuard, session_dir

TENANT = "t1"


def test_a_counter_left_empty_or_zeroed_still_grants_above_the_fence(tmp_path: Path) -> None:
    """After a crash `lease.token` may be empty or NUL bytes: the next token is above the fence's highest."""
    guard = FencingGuard.for_session(tmp_path, TENANT, "s1")
    guard.check_and_raise(7)
    counter = session_dir(tmp_path, TENANT, "s1") / "lease.token"
    for leftover in (b"", b"\x00\x00\x00"):
        counter.write_bytes(leftover)
        lease = FileLease(tmp_path)
        grant = lease.acquire(TENANT, "s1", ttl_s=30, token_floor=guard.highest())
        assert grant.token > 7
        guard.check_and_raise(grant.token)  # the new owner is not refused
        lease.release(grant)


def test_a_damaged_holder_file_reads_as_an_unknown_holder(tmp_path: Path) -> None:
    """A `lease.json` left empty by a crash does not stop the lease from refusing a second owner."""
    first = FileLease(tmp_path)
    grant = first.acquire(TENANT, "s1", ttl_s=30)
    (session_dir(tmp_path, TENANT, "s1") / "lease.json").write_bytes(b"")
    with pytest.raises(LeaseHeld, match="unknown"):
        FileLease(tmp_path).acquire(TENANT, "s1", ttl_s=30)
    first.release(grant)
