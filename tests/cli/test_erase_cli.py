"""`agentrt erase` and `agentrt store gc` through the console script, in a fresh folder with the
shipped default config: two tenants, two users each, a forked session, shared blobs, a leased
session, retention by age."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent.session.lease_file import FileLease
from agent.session.session import ChatSession, SessionStatus
from agent.session.stores.jsonl import JsonlSessionStore
from tests.cli.console import Ran, agentrt
from tests.support.runners import make_config


def _json(ran: Ran) -> dict[str, Any]:
    assert ran.code == 0, ran.both
    data: dict[str, Any] = json.loads(ran.out)
    return data


def _ids(work: Path, tenant: str, *extra: str) -> set[str]:
    ran = agentrt("sessions", "--tenant", tenant, "--json", "--limit", "0", *extra, cwd=work)
    assert ran.code == 0, ran.both
    return {str(r["session_id"]) for r in json.loads(ran.out)}


def _run(work: Path, tenant: str, user: str, sid: str) -> None:
    args = ("--tenant", tenant, "--user", user, "--new-session", sid, "--approve-all", "--json")
    got = _json(agentrt("run", *args, "Summarise the sales", cwd=work))
    assert got["status"] == "COMPLETED", got


def _blobs(work: Path) -> set[str]:
    root = work / ".agentrt" / "blobs" / "sha256"
    return {p.parent.name + p.name for p in root.glob("*/*")} if root.is_dir() else set()


def _doctor_ok(work: Path, tenant: str, sid: str | None = None) -> None:
    ran = agentrt("doctor", *([sid] if sid else []), "--tenant", tenant, "--json", cwd=work)
    assert ran.code == 0, ran.both
    assert all(c["status"] != "FAIL" for c in json.loads(ran.out)["checks"]), ran.out


def test_erase_one_user_then_tenants_keeps_shared_blobs_while_referenced(tmp_path: Path) -> None:
    """erase A/U1 removes only A/U1's sessions (one forked) everywhere; the others stay resumable and
    the doctor is clean; a blob both tenants stored survives each erase until its last reference goes."""
    for tenant in ("A", "B"):
        for user in ("U1", "U2"):
            _run(tmp_path, tenant, user, f"{tenant.lower()}-{user.lower()}")
    shown = _json(agentrt("show", "a-u1", "--tenant", "A", "--json", "--last", "500", cwd=tmp_path))
    answer = [e["id"] for e in shown["entries"] if e["type"] == "assistant_message"][-1]
    _json(agentrt("fork", "a-u1", "--tenant", "A", "--from", str(answer), "--json", cwd=tmp_path))
    shared = _blobs(tmp_path)
    assert shared  # the demo stores the same report in every session: one blob each, shared

    plan = agentrt("erase", "--tenant", "A", "--user", "U1", cwd=tmp_path)
    assert plan.code == 2 and "add --yes" in plan.error_line() and "would delete A/a-u1" in plan.out
    assert _ids(tmp_path, "A") == {"a-u1", "a-u2"}  # nothing went without --yes

    done = _json(agentrt("erase", "--tenant", "A", "--user", "U1", "--yes", "--json", cwd=tmp_path))
    assert done["session_ids"] == ["A/a-u1"] and done["files"] > 0 and done["sql_rows"] > 0
    assert done["blobs"] == 0 and done["blobs_kept_shared"] == len(shared)
    assert _ids(tmp_path, "A") == {"a-u2"} and _ids(tmp_path, "B") == {"b-u1", "b-u2"}
    assert not (tmp_path / ".agentrt" / "tenants" / "A" / "sessions" / "a-u1").exists()
    gone = agentrt("show", "a-u1", "--tenant", "A", cwd=tmp_path)
    assert gone.code == 3, gone.both
    assert _blobs(tmp_path) == shared
    again = agentrt(
        "run", "--tenant", "A", "--user", "U2", "--session", "a-u2", "--approve-all", "--json", "More", cwd=tmp_path
    )
    assert _json(again)["status"] == "COMPLETED"
    for tenant, sid in (("A", "a-u2"), ("B", "b-u1"), ("B", "b-u2")):
        _doctor_ok(tmp_path, tenant, sid)
    _doctor_ok(tmp_path, "A")

    b = _json(agentrt("erase", "--tenant", "B", "--yes", "--json", cwd=tmp_path))
    assert b["sessions"] == 2 and b["blobs"] == 0 and _blobs(tmp_path) == shared  # A/U2 still references them
    assert not (tmp_path / ".agentrt" / "tenants" / "B").exists() and _ids(tmp_path, "B") == set()
    _doctor_ok(tmp_path, "A", "a-u2")

    a = _json(agentrt("erase", "--tenant", "A", "--yes", "--json", cwd=tmp_path))
    assert a["session_ids"] == ["A/a-u2"] and a["blobs"] == len(shared) and a["blob_bytes"] > 0
    assert _blobs(tmp_path) == set()
    nothing = agentrt("erase", "--tenant", "A", "--yes", cwd=tmp_path)
    assert nothing.code == 0 and "nothing to erase for tenant A" in nothing.out


def test_bad_ids_unknown_tenant_and_dry_run(tmp_path: Path) -> None:
    """Bad tenant/user ids: exit 2, one line, nothing made on disk; an unknown tenant: "nothing to
    erase", exit 0; --dry-run lists and keeps everything."""
    for args in (("--tenant", "../etc"), ("--tenant", "A", "--user", "a b"), ("--tenant", "")):
        ran = agentrt("erase", *args, "--yes", cwd=tmp_path)
        assert ran.code == 2, ran.both
        assert "invalid" in ran.error_line() or "must not be empty" in ran.error_line()
    ran = agentrt("erase", "--tenant", "nobody", "--yes", cwd=tmp_path)
    assert ran.code == 0 and ran.out.strip() == "nothing to erase for tenant nobody", ran.both
    assert not (tmp_path / ".agentrt").exists()
    _run(tmp_path, "A", "U1", "keep-me")
    dry = agentrt("erase", "--tenant", "A", "--dry-run", cwd=tmp_path)
    assert dry.code == 0 and "would delete A/keep-me" in dry.out, dry.both
    assert _ids(tmp_path, "A") == {"keep-me"}


def test_leased_session_is_skipped_by_erase_and_gc(tmp_path: Path) -> None:
    """A session whose lease is held is reported as skipped (exit 4) and stays; the rest goes."""
    cfg = make_config(tmp_path, session={"retention_days": 0})
    _seed(tmp_path, "A", "busy", status=SessionStatus.ENDED, age=timedelta(hours=2))
    _seed(tmp_path, "A", "idle", status=SessionStatus.ENDED, age=timedelta(hours=2))
    lease = FileLease(tmp_path / "agentrt")
    grant = lease.acquire("A", "busy", ttl_s=300)
    try:
        gc = agentrt("store", "gc", "--config", str(cfg), cwd=tmp_path)
        assert gc.code == 4 and "skipped A/busy: a run holds it" in gc.out and "deleted A/idle" in gc.out, gc.both
        ran = agentrt("erase", "--config", str(cfg), "--tenant", "A", "--yes", cwd=tmp_path)
        assert ran.code == 4 and "run the same erase again" in ran.error_line(), ran.both
        assert _ids(tmp_path, "A", "--config", str(cfg)) == {"busy"}
    finally:
        lease.release(grant)
    ran = agentrt("erase", "--config", str(cfg), "--tenant", "A", "--yes", cwd=tmp_path)
    assert ran.code == 0 and "deleted A/busy" in ran.out, ran.both
    assert not (tmp_path / "agentrt" / "tenants" / "A").exists()


def _seed(
    work: Path, tenant: str, sid: str, *, status: SessionStatus, age: timedelta, expire_minutes: float = 60.0
) -> None:
    """A session (header, document, index row) whose last activity was `age` ago."""
    store = JsonlSessionStore(work / "agentrt", fsync="never")
    at = datetime.now(UTC) - age
    s = ChatSession(
        session_id=sid,
        agent_id="agentrt",
        tenant_id=tenant,
        user_id="U1",
        status=status,
        expire_minutes=expire_minutes,
        created_at=at,
        last_active_time=at,
        version=1,
    )
    store.create_log(s, sync_dir=False)
    store.put(s)
    store.index.close()


def test_store_gc_deletes_only_sessions_past_retention(tmp_path: Path) -> None:
    """retention 1 h: a session expired 90 min ago and one ENDED 2 h ago go; one expired 30 min ago,
    a recent ENDED one and a long-lived one stay. --dry-run first deletes nothing."""
    cfg = make_config(tmp_path, session={"retention_days": 1 / 24})
    _seed(tmp_path, "A", "expired-long-ago", status=SessionStatus.ACTIVE, age=timedelta(hours=2), expire_minutes=30)
    _seed(tmp_path, "A", "expired-lately", status=SessionStatus.ACTIVE, age=timedelta(hours=2), expire_minutes=90)
    _seed(tmp_path, "B", "ended-long-ago", status=SessionStatus.ENDED, age=timedelta(hours=2), expire_minutes=0)
    _seed(tmp_path, "B", "ended-lately", status=SessionStatus.ENDED, age=timedelta(minutes=10), expire_minutes=0)
    _seed(tmp_path, "B", "long-lived", status=SessionStatus.ACTIVE, age=timedelta(hours=2), expire_minutes=7 * 24 * 60)
    c = ("--config", str(cfg))
    dry = _json(agentrt("store", "gc", "--dry-run", "--json", *c, cwd=tmp_path))
    assert sorted(dry["session_ids"]) == ["A/expired-long-ago", "B/ended-long-ago"]
    assert _ids(tmp_path, "A", *c) == {"expired-long-ago", "expired-lately"}
    done = agentrt("store", "gc", *c, cwd=tmp_path)
    assert done.code == 0 and "deleted 2 sessions" in done.out, done.both
    assert _ids(tmp_path, "A", *c) == {"expired-lately"}
    assert _ids(tmp_path, "B", *c) == {"ended-lately", "long-lived"}
    assert not (tmp_path / "agentrt" / "tenants" / "A" / "sessions" / "expired-long-ago").exists()
    again = agentrt("store", "gc", *c, cwd=tmp_path)
    assert again.code == 0 and "deleted 0 sessions" in again.out
    off = agentrt("store", "gc", cwd=tmp_path)  # the default config keeps sessions forever
    assert off.code == 0 and "retention_days is not set" in off.out


def test_workers_reclaim_at_most_every_interval_and_one_at_a_time(tmp_path: Path) -> None:
    """`maybe_collect` (what a worker runs after a task): runs once, then not again within
    session.gc_every_minutes; never while another worker holds the gc lock."""
    import fcntl
    import os

    from agent.runner import AgentRunner
    from agent.session.retention import GC_LOCK_FILE, maybe_collect

    cfg = make_config(tmp_path, session={"retention_days": 0, "gc_every_minutes": 60})
    runner = AgentRunner.from_config(cfg)
    _seed(tmp_path, "A", "old-1", status=SessionStatus.ENDED, age=timedelta(hours=2))
    lock = tmp_path / "agentrt" / GC_LOCK_FILE
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another worker at it
    try:
        assert maybe_collect(runner) is None
    finally:
        os.close(fd)
    first = maybe_collect(runner)
    assert first is not None and first.sessions == [("A", "old-1")]
    _seed(tmp_path, "A", "old-2", status=SessionStatus.ENDED, age=timedelta(hours=2))
    assert maybe_collect(runner) is None  # ran less than an hour ago
    assert _ids(tmp_path, "A", "--config", str(cfg)) == {"old-2"}
