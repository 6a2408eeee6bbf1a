"""The file lease's files are not fsynced: what a machine crash can leave of them still works,
and a damaged record (a complete one whose checksum fails) is an error, never "no lease"."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.errors import DataCorrupt, LeaseHeld
from agent.session.lease_file import FileLease
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


def _flip(path: Path, old: bytes, new: bytes) -> bytes:
    """Rewrite `path` with the last `old` replaced by `new` (one bit apart); returns the bytes."""
    data = path.read_bytes()
    at = data.rindex(old)
    damaged = data[:at] + new + data[at + len(old) :]
    assert sum(bin(a ^ b).count("1") for a, b in zip(data, damaged, strict=True)) == 1
    path.write_bytes(damaged)
    return damaged


def test_a_damaged_counter_is_an_error_to_read_and_a_grant_counts_from_the_fence(tmp_path: Path) -> None:
    """A complete `lease.token` whose checksum fails is an error naming the file when read (it is
    not "no counter"); a new grant counts from the fence instead (the token floor every grant
    has) and rewrites the counter, so the damage never stops the session."""
    lease = FileLease(tmp_path)
    for _ in range(3):
        lease.release(lease.acquire(TENANT, "s1", ttl_s=30))
    counter = session_dir(tmp_path, TENANT, "s1") / "lease.token"
    _flip(counter, b"3", b"2")
    with pytest.raises(DataCorrupt, match=r"lease\.token is damaged"):
        lease.counter(TENANT, "s1")
    assert lease.acquire(TENANT, "s1", ttl_s=30, token_floor=3).token == 4
    assert lease.counter(TENANT, "s1") == 4


def test_a_holder_record_with_a_flipped_bit_never_names_another_holder(tmp_path: Path) -> None:
    """A damaged `lease.json` of a held session: the refusal says the holder is unknown because
    the file is damaged (not a misspelt holder, not "free"); reading it is an error naming it."""
    first = FileLease(tmp_path)
    grant = first.acquire(TENANT, "s1", holder="worker-a", ttl_s=30)
    state = session_dir(tmp_path, TENANT, "s1") / "lease.json"
    damaged = _flip(state, b"worker-a", b"worker-c")
    with pytest.raises(LeaseHeld, match=r"unknown holder .*lease\.json is damaged") as info:
        FileLease(tmp_path).acquire(TENANT, "s1", ttl_s=30)
    assert "worker-c" not in str(info.value)
    with pytest.raises(DataCorrupt, match=r"lease\.json is damaged"):
        FileLease(tmp_path).state(TENANT, "s1")
    assert state.read_bytes() == damaged
    first.release(grant)


def test_lease_files_of_the_previous_format_are_read_then_written_framed(tmp_path: Path) -> None:
    """A plain-integer counter and a plain-JSON holder file from the previous release still work."""
    directory = session_dir(tmp_path, TENANT, "s1")
    directory.mkdir(parents=True)
    (directory / "lease.token").write_bytes(b"7\n")
    (directory / "lease.json").write_bytes(b'{"expires_at":1.5,"holder":"old-worker","token":7}\n')
    lease = FileLease(tmp_path)
    assert lease.counter(TENANT, "s1") == 7
    assert lease.state(TENANT, "s1") == {"holder": "old-worker", "token": 7, "expires_at": 1.5}
    grant = lease.acquire(TENANT, "s1", holder="new-worker", ttl_s=30)
    assert grant.token == 8 and lease.counter(TENANT, "s1") == 8
    assert lease.state(TENANT, "s1")["holder"] == "new-worker"
    assert (directory / "lease.token").read_bytes().startswith(b'{"_crc":')
    lease.release(grant)
