"""PostgresLease against the real PostgreSQL (directly and through PgBouncer in transaction pooling):
one owner per session, tokens that only grow, lapsed holders lose and are fenced.

Each test has a schema of its own in the test database (the Alembic migrations applied to it by the
session store, as `agentrt db upgrade` does), dropped afterwards.
"""

from __future__ import annotations

import itertools
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

import psycopg
import pytest

from agent.core.errors import BackendUnavailable, LeaseHeld, SchemaOutdated, exit_code
from agent.session.lease import LeaseHeartbeat
from agent.session.lease_postgres import PostgresLease
from agent.session.stores.sql import SqlSessionStore
from agent.tools.journal import ToolExecutionJournal
from checkpointing.exceptions import InvalidIdError, StaleFencingTokenError
from checkpointing.fencing import FencingGuard
from tests.integration.test_stores_support import DATABASE_URL, free_port

REPO = Path(__file__).resolve().parents[3]
TENANT = "acme"


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema at the newest migration; dropped afterwards."""
    name = f"lease_{uuid.uuid4().hex[:12]}"
    store = SqlSessionStore(DATABASE_URL, schema=name)
    try:
        store.init()
    finally:
        store.dispose()
    yield name
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(params=["direct", "pgbouncer"])
def url(request: pytest.FixtureRequest) -> str:
    """The database URL: PostgreSQL itself, or a PgBouncer in transaction pooling mode before it."""
    if request.param == "direct":
        return DATABASE_URL
    return str(request.getfixturevalue("pgbouncer"))


def rows(schema: str, session_id: str) -> list[tuple[Any, ...]]:
    """The lease table's rows of a session, read with plain SQL."""
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        q = f'SELECT scope, holder, token FROM "{schema}".session_leases WHERE session_id = %s ORDER BY scope'
        return conn.execute(q, (session_id,)).fetchall()


def wait_lapsed(lease: PostgresLease, session_id: str) -> None:
    """Block until the session's lease has lapsed by the database's clock (bounded loop)."""
    for _ in range(200):
        state = lease.state(TENANT, session_id)
        if state.get("holder") is None:
            return
        time.sleep(max(state["expires_at"] - time.time(), 0.01))
    pytest.fail(f"the lease of {session_id} never lapsed")


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    """Start `code` in a fresh interpreter (this checkout first on the path) with line-based pipes."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
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


def test_acquire_held_release_and_tokens_survive_release(url: str, schema: str) -> None:
    """A held session is refused at once naming holder and expiry; release frees it but keeps the
    token counting (the row is never deleted)."""
    lease = PostgresLease(url, schema=schema)
    first = lease.acquire(TENANT, "s1", holder="host:1:a", ttl_s=30)
    assert first.token == 1 and first.expires_at > time.time() + 20
    with pytest.raises(LeaseHeld) as info:
        lease.acquire(TENANT, "s1", holder="host:2:b", ttl_s=30)
    assert info.value.holder == "host:1:a" and abs((info.value.expires_at or 0) - first.expires_at) < 1
    assert "session s1 is held by host:1:a" in str(info.value)
    lease.release(first)
    assert rows(schema, "s1") == [("run", None, 1)]
    second = lease.acquire(TENANT, "s1", holder="host:2:b", ttl_s=30)
    assert second.token == 2
    lease.release(first)  # an old grant's release frees nothing
    with pytest.raises(LeaseHeld):
        lease.acquire(TENANT, "s1", holder="host:1:a", ttl_s=30)
    lease.release(second)
    assert lease.acquire(TENANT, "s1", ttl_s=30).token == 3


def test_tenants_scopes_and_ids_are_separate_rows(schema: str) -> None:
    """The same session id under two tenants, and the drain lease beside the run lease, are
    independent leases; an id that is not one is refused before any SQL."""
    run, drain = PostgresLease(DATABASE_URL, schema=schema), PostgresLease(DATABASE_URL, schema=schema, scope="drain")
    a = run.acquire("tenant-a", "s1", ttl_s=30)
    b = run.acquire("tenant-b", "s1", ttl_s=30)
    d = drain.acquire("tenant-a", "s1", ttl_s=30)
    assert (a.token, b.token, d.token) == (1, 1, 1)
    with pytest.raises(InvalidIdError):
        run.acquire(TENANT, "x'-drop", ttl_s=30)
    assert rows(schema, "x'-drop") == []
    assert len(rows(schema, "s1")) == 3


def test_expired_holder_loses_extend_and_is_fenced(url: str, schema: str, tmp_path: Path) -> None:
    """Past its TTL the old grant is taken over with a higher token; the old holder can neither
    extend nor release the new grant, and its token is refused by the fence."""
    lease = PostgresLease(url, schema=schema)
    old = lease.acquire(TENANT, "s1", holder="host:1:old", ttl_s=0.2)
    guard_old = FencingGuard.for_session(tmp_path, TENANT, "s1")
    guard_old.check_and_raise(old.token)
    wait_lapsed(lease, "s1")
    new = lease.acquire(TENANT, "s1", holder="host:2:new", ttl_s=30)
    assert new.token == old.token + 1
    FencingGuard.for_session(tmp_path, TENANT, "s1").check_and_raise(new.token)
    with pytest.raises(StaleFencingTokenError):
        guard_old.check_and_raise(old.token)
    with pytest.raises(LeaseHeld) as info:
        lease.extend(old)
    assert info.value.holder == "host:2:new"
    lease.release(old)
    assert lease.extend(new).token == new.token
    with pytest.raises(LeaseHeld):
        lease.acquire(TENANT, "s1", ttl_s=30)


def test_lapsed_grant_nobody_took_can_be_extended(schema: str) -> None:
    """A grant that lapsed with no newer grant is taken back by extend with the same token."""
    lease = PostgresLease(DATABASE_URL, schema=schema)
    grant = lease.acquire(TENANT, "s1", ttl_s=0.1)
    wait_lapsed(lease, "s1")
    again = lease.extend(grant, ttl_s=30)
    assert again.token == grant.token and again.expires_at > time.time() + 20
    with pytest.raises(LeaseHeld):
        lease.acquire(TENANT, "s1", ttl_s=30)


def test_token_floor_lifts_the_counter(schema: str) -> None:
    """token_floor (the fence's highest token) lifts the next token, on a new row and an old one."""
    lease = PostgresLease(DATABASE_URL, schema=schema)
    grant = lease.acquire(TENANT, "s1", ttl_s=30, token_floor=100)
    assert grant.token == 101
    lease.release(grant)
    assert lease.acquire(TENANT, "s1", ttl_s=30, token_floor=5).token == 102


def test_heartbeat_keeps_the_lease_and_reports_its_loss(url: str, schema: str) -> None:
    """The heartbeat holds a 0.3 s lease well past its TTL; once another holder takes over, it
    stops with LeaseHeld naming that holder."""
    lease = PostgresLease(url, schema=schema)
    grant = lease.acquire(TENANT, "s1", ttl_s=0.3)
    with LeaseHeartbeat(lease, grant, interval_s=0.05) as hb:
        for _ in range(400):
            if hb.beats >= 10:
                break
            time.sleep(0.01)
        assert hb.beats >= 10
        with pytest.raises(LeaseHeld):
            lease.acquire(TENANT, "s1", ttl_s=30)
    assert hb.lost is None
    wait_lapsed(lease, "s1")
    thief = lease.acquire(TENANT, "s1", holder="host:9:thief", ttl_s=30)
    beat = LeaseHeartbeat(lease, hb.grant, interval_s=0.01).start()
    beat._thread.join(timeout=30)
    assert beat.lost is not None and beat.lost.holder == thief.holder


def test_unreachable_database_names_host_and_port_not_the_password() -> None:
    """A database that does not answer: one line naming host:port, never the password."""
    port = free_port()
    lease = PostgresLease(f"postgresql://postgres:s3cret-pw@127.0.0.1:{port}/test", connect_timeout=2)
    with pytest.raises(BackendUnavailable) as info:
        lease.acquire(TENANT, "s1", ttl_s=1)
    text = str(info.value)
    assert f"127.0.0.1:{port}" in text and "s3cret-pw" not in text and "\n" not in text
    assert exit_code(info.value) == 6


def test_missing_table_says_db_upgrade(schema: str) -> None:
    """A database without the lease table: SchemaOutdated (exit 2) naming `agentrt db upgrade`."""
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute(f'DROP TABLE "{schema}".session_leases')
    lease = PostgresLease(DATABASE_URL, schema=schema, config_hint=" --config prod.yaml")
    with pytest.raises(SchemaOutdated) as info:
        lease.acquire(TENANT, "s1", ttl_s=1)
    assert "run `agentrt db upgrade --config prod.yaml`" in str(info.value) and exit_code(info.value) == 2
    with pytest.raises(SchemaOutdated):
        PostgresLease(DATABASE_URL, schema=f"{schema}_none").acquire(TENANT, "s1", ttl_s=1)


# Each racer loops on acquire (no barrier: they start when they start) until it has held the
# session HOLDS times; a hold is recorded from just after the grant to just before the release,
# both by this host's clock, so recorded holds lie inside the real ones.
RACER = """
    import json, sys, time
    from agent.core.errors import LeaseHeld
    from agent.session.lease_postgres import PostgresLease
    url, schema, sid, name, holds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    lease = PostgresLease(url, schema=schema)
    out, refused = [], 0
    while len(out) < holds and refused < 20000:
        try:
            grant = lease.acquire("acme", sid, holder=name, ttl_s=30)
        except LeaseHeld:
            refused += 1
            time.sleep(0.001)
            continue
        start = time.time()
        time.sleep(0.01)
        end = time.time()
        lease.release(grant)
        out.append({"token": grant.token, "start": start, "end": end, "holder": name})
    print(json.dumps({"holds": out, "refused": refused}), flush=True)
"""


def test_eight_processes_looping_on_one_session_never_overlap(url: str, schema: str) -> None:
    """8 plain processes acquire and release one session in a loop: no two holds overlap, and the
    tokens, in the order of the holds, are 1, 2, 3, ... with none lost or repeated."""
    holds_each = 5
    procs = [spawn(RACER, url, schema, "s-race", f"racer-{i}", str(holds_each)) for i in range(8)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    holds = sorted((h for r in results for h in r["holds"]), key=lambda h: h["start"])
    assert len(holds) == 8 * holds_each
    assert sum(r["refused"] for r in results) > 0  # they did contend
    for before, after in itertools.pairwise(holds):
        assert before["end"] <= after["start"], (before, after)
    assert [h["token"] for h in holds] == list(range(1, len(holds) + 1))
    assert rows(schema, "s-race") == [("run", None, len(holds))]


PAUSED_HOLDER = """
    import json, sys
    from agent.core.errors import LeaseHeld
    from agent.session.lease import LeaseHeartbeat
    from agent.session.lease_postgres import PostgresLease
    from agent.tools.journal import ToolExecutionJournal
    from checkpointing.exceptions import InvalidIdError, StaleFencingTokenError
    from checkpointing.fencing import FencingGuard
    base, url, schema = sys.argv[1], sys.argv[2], sys.argv[3]
    lease = PostgresLease(url, schema=schema)
    grant = lease.acquire("acme", "s1", holder="host:1:paused", ttl_s=0.5)
    hb = LeaseHeartbeat(lease, grant, interval_s=0.1).start()
    guard = FencingGuard.for_session(base, "acme", "s1")
    guard.check_and_raise(grant.token)
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


def test_holder_paused_past_its_ttl_cannot_write_after_takeover(url: str, schema: str, tmp_path: Path) -> None:
    """SIGSTOP a holder past its TTL, take over, SIGCONT: its journal write is refused with
    StaleFencingTokenError and its lease is lost to the new holder."""
    proc = spawn(PAUSED_HOLDER, str(tmp_path), url, schema)
    lease = PostgresLease(url, schema=schema)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        old_token = json.loads(line)["token"]
        assert send(proc, "write c-before") == "ok"
        os.kill(proc.pid, signal.SIGSTOP)
        wait_lapsed(lease, "s1")
        new = lease.acquire(TENANT, "s1", holder="host:2:new", ttl_s=30)
        assert new.token == old_token + 1
        guard = FencingGuard.for_session(tmp_path, TENANT, "s1")
        guard.check_and_raise(new.token)
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


def test_settings_build_the_run_and_drain_leases_on_database_url() -> None:
    """`persistence.lease: postgres` builds the run lease and the workers' drain lease on the
    database of `persistence.database_url`."""
    from agent.core.config import load_settings
    from agent.runner.drain import drain_lease
    from agent.runner.services import build_lease

    settings = load_settings(overrides={"persistence.lease": "postgres", "persistence.database_url": DATABASE_URL})
    run, drain = build_lease(settings), drain_lease(settings)
    assert isinstance(run, PostgresLease) and isinstance(drain, PostgresLease)
    assert (run.scope, drain.scope) == ("run", "drain")
    assert run.url == drain.url and run.table_name == drain.table_name == "session_leases"
