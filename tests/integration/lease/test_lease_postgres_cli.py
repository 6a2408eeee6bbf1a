"""`persistence.lease: postgres` through the installed CLI: runs take and free the lease in the
table `agentrt db init` made, a second holder is refused with LeaseHeld, a missing table or an
unreachable database is one line saying what to do.

Each test has a PostgreSQL database of its own (made by `agentrt db init`, dropped after) and a
non-default tenant.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration.test_stores_support import DATABASE_URL, free_port
from tests.support.crash import DRILL_TEXT, child_env, make_drill_config, run_cli, start_cli, wait_for
from tests.support.runners import make_config

SERVER = DATABASE_URL.rsplit("/", 1)[0]
TENANT = "acme-lease"


@pytest.fixture
def dbname() -> Iterator[str]:
    """A unique database name on the shared server; the database is dropped afterwards."""
    name = f"agentrt_lease_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def lease_rows(dbname: str) -> list[tuple[str, str, str, str | None, int]]:
    """Every row of the lease table (tenant, session, scope, holder, token)."""
    with psycopg.connect(f"{SERVER}/{dbname}", autocommit=True) as conn:
        q = "SELECT tenant_id, session_id, scope, holder, token FROM session_leases ORDER BY 1, 2, 3"
        return conn.execute(q).fetchall()


def agentrt(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run `agentrt ARGS` with this checkout's code and no AGENTRT_* variables of the caller."""
    done = run_cli(list(args), env if env is not None else child_env(cwd / "counter"), timeout=180, cwd=cwd)
    return done.code, done.stdout, done.stderr


def doctor_lease(cfg: str, sid: str, cwd: Path) -> dict[str, Any]:
    """The `lease` check of `agentrt doctor SID --json` (read without taking the lease)."""
    _, out, err = agentrt("doctor", sid, "--config", cfg, "--json", cwd=cwd)
    checks = {c["name"]: c for c in json.loads(out)["checks"]} if out.strip() else {}
    assert "lease" in checks, err
    return checks["lease"]


def one_line(err: str) -> str:
    """The error as one line (rich may wrap a long one on narrow terminals)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return " ".join(" ".join(lines).split())


def test_runs_take_and_free_the_lease_in_postgres(tmp_path: Path, dbname: str) -> None:
    """`db init` makes the lease table; `run`, `run --session`, a fork and a turn on it complete,
    each with a new token, and leave the lease free; the token is kept for the next holder and is
    the one the session's fence recorded; another user of the tenant is refused."""
    persistence = {"database_url": f"{SERVER}/{dbname}", "lease": "postgres", "lease_ttl_s": 30}
    cfg = str(make_config(tmp_path, persistence=persistence, session={"tenant_id": TENANT}))
    code, _, err = agentrt("db", "init", "--config", cfg, cwd=tmp_path)
    assert code == 0, err
    code, out, err = agentrt("run", "--config", cfg, "--approve-all", "--json", "hello", cwd=tmp_path)
    assert code == 0, err
    first = json.loads(out)
    assert first["status"] == "COMPLETED"
    sid = first["session_id"]
    [(tenant, session, scope, holder, token)] = lease_rows(dbname)
    assert (tenant, session, scope, holder) == (TENANT, sid, "run", None)
    code, out, err = agentrt("run", "--config", cfg, "--session", sid, "--approve-all", "--json", "again", cwd=tmp_path)
    assert code == 0, err
    assert json.loads(out)["status"] == "COMPLETED"
    [(_, _, _, holder_after, token_after)] = lease_rows(dbname)
    assert holder_after is None and token_after > token
    assert doctor_lease(cfg, sid, tmp_path)["evidence"]["summary"] == "free (postgres lease)"

    # Another user of the tenant sees no such session: refused before the lease is taken.
    code, _, _ = agentrt("run", "--config", cfg, "--user", "bob", "--session", sid, "hi", cwd=tmp_path)
    assert code == 3 and lease_rows(dbname)[0][4] == token_after
    # A fork and a turn on it take the lease again, each with a higher token.
    code, out, err = agentrt("show", sid, "--config", cfg, "--json", cwd=tmp_path)
    assert code == 0, err
    answer = next(e["id"] for e in json.loads(out)["entries"] if e["type"] == "assistant_message")
    code, out, err = agentrt("fork", sid, "--config", cfg, "--from", answer, "--json", cwd=tmp_path)
    assert code == 0, err
    branch = json.loads(out)["branch_id"]
    code, out, err = agentrt("run", "--config", cfg, "--session", sid, "--approve-all", "--json", "fork", cwd=tmp_path)
    assert code == 0, err
    assert json.loads(out)["status"] == "COMPLETED"
    code, out, _ = agentrt("show", sid, "--config", cfg, "--json", cwd=tmp_path)
    assert json.loads(out)["session"]["current_branch_id"] == branch
    [(_, _, _, holder_fork, token_fork)] = lease_rows(dbname)
    assert holder_fork is None and token_fork >= token_after + 2
    fence = json.loads((tmp_path / "agentrt" / "tenants" / TENANT / "sessions" / sid / "fence.json").read_text())
    assert fence["highest_token"] == token_fork  # the writes were fenced with the PostgreSQL tokens


def test_a_second_holder_is_refused_while_a_run_holds_the_session(tmp_path: Path, dbname: str) -> None:
    """A run parked inside a tool holds the session; `run --session` from another process fails at
    once (exit 4) naming that run as the holder; the parked run then completes."""
    persistence = {"database_url": f"{SERVER}/{dbname}", "lease": "postgres", "lease_ttl_s": 30}
    cfg = str(make_drill_config(tmp_path, persistence=persistence, session={"tenant_id": TENANT}))
    counter, gate = tmp_path / "counter", tmp_path / "gate"
    code, _, err = agentrt("db", "init", "--config", cfg, cwd=tmp_path)
    assert code == 0, err
    holder_run = start_cli(
        ["run", "--config", cfg, "--new-session", "lease-1", "--json", DRILL_TEXT],
        child_env(counter, AGENTRT_DRILL_GATE=str(gate)),
    )
    try:
        waiting = Path(str(gate) + ".waiting")
        assert wait_for(lambda: waiting.exists() or holder_run.poll() is not None, timeout_s=120)
        assert waiting.exists(), holder_run.communicate()
        [(_, _, _, holder, _)] = lease_rows(dbname)
        assert holder is not None and holder.split(":")[1] == str(holder_run.pid)
        seen = doctor_lease(cfg, "lease-1", tmp_path)
        assert seen["status"] == "WARN" and seen["evidence"]["holder"] == holder, seen
        code, _, err = agentrt("run", "--config", cfg, "--session", "lease-1", "other", cwd=tmp_path)
        assert code == 4
        assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
        assert one_line(err).startswith(f"agentrt: error: session lease-1 is held by {holder} (lease expires at ")
        gate.touch()
        out, err = holder_run.communicate(timeout=180)
    finally:
        gate.touch()
        if holder_run.poll() is None:
            holder_run.kill()
            holder_run.communicate()
    assert holder_run.returncode == 0, err
    assert json.loads(out)["status"] == "COMPLETED"
    assert lease_rows(dbname)[0][3] is None


def test_missing_lease_table_says_db_upgrade(tmp_path: Path, dbname: str) -> None:
    """A database whose lease table is gone: `run` fails with exit 2, one line naming the command,
    and starts no session."""
    persistence = {"database_url": f"{SERVER}/{dbname}", "lease": "postgres"}
    cfg = str(make_config(tmp_path, persistence=persistence, session={"tenant_id": TENANT}))
    assert agentrt("db", "init", "--config", cfg, cwd=tmp_path)[0] == 0
    with psycopg.connect(f"{SERVER}/{dbname}", autocommit=True) as conn:
        conn.execute("DROP TABLE session_leases")
    code, _, err = agentrt("run", "--config", cfg, "--new-session", "s-1", "hello", cwd=tmp_path)
    assert code == 2
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
    assert f"run `agentrt db upgrade --config {cfg}`" in one_line(err)
    assert not (tmp_path / "agentrt" / "tenants" / TENANT / "sessions" / "s-1" / "session.json").exists()


def test_unreachable_database_names_host_and_port(tmp_path: Path) -> None:
    """A lease database nobody answers at: one line naming host:port, never the password."""
    port = free_port()
    persistence = {"database_url": f"postgresql://postgres:s3cret-pw@127.0.0.1:{port}/test", "lease": "postgres"}
    cfg = str(make_config(tmp_path, persistence=persistence, session={"tenant_id": TENANT}))
    code, _, err = agentrt("run", "--config", cfg, "--new-session", "s-1", "hello", cwd=tmp_path)
    assert code == 6, err
    # Warnings of the session store (PRIMARY rides out a SQL outage) come first; the error is one line.
    [error] = [ln for ln in err.splitlines() if ln.startswith("agentrt: error:")]
    assert f"cannot reach the lease database at 127.0.0.1:{port}" in error and "s3cret-pw" not in err
    assert not (tmp_path / "agentrt" / "tenants" / TENANT / "sessions" / "s-1" / "session.json").exists()


def test_a_sqlite_database_url_is_refused_with_what_to_set(tmp_path: Path) -> None:
    """`lease: postgres` with the default SQLite database: exit 2 saying which setting to change."""
    cfg = str(make_config(tmp_path, persistence={"lease": "postgres"}))
    code, _, err = agentrt("run", "--config", cfg, "hello", cwd=tmp_path)
    assert code == 2
    assert "persistence.database_url" in one_line(err) and "PostgreSQL URL" in one_line(err)
    assert not (tmp_path / "agentrt").exists()
