"""`agentrt export` / `import` and `agentrt store migrate` on the PostgreSQL record store
(`persistence.store: postgres`), through the CLI in real processes.

A session moves between the files store and the PostgreSQL store byte for byte (the export file of
files -> postgres -> files is the identical file), reads and continues from a machine whose
base_dir is empty, keeps its tenant and user (another user's session is hidden as on files), and
a migrate of a files base_dir is resumable: run again it moves nothing, killed midway and run
again it finishes. Each test has a PostgreSQL database of its own (`agentrt db init`, dropped
after).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.integration.test_stores_support import DATABASE_URL
from tests.support.crash import SIGKILL_CODE, Proc, child_env, run_cli, wait_for
from tests.support.runners import ROOT

SERVER = DATABASE_URL.rsplit("/", 1)[0]
DEMO = "Summarise the 2026 sales by region"
TENANT = "acme-move"


@pytest.fixture
def dbname() -> Iterator[str]:
    """A unique database name on the shared server; the database is dropped afterwards."""
    name = f"agentrt_move_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def config(where: Path, base: Path, dbname: str | None = None, **persistence: Any) -> Path:
    """configs/default.yaml on `base`: the files store, or the PostgreSQL store of `dbname`."""
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data["persistence"]["base_dir"] = str(base)
    if dbname is not None:
        url = f"{SERVER}/{dbname}"
        data["persistence"].update(store="postgres", database_url=url, lease="postgres", **persistence)
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(yaml.safe_dump(data, sort_keys=False))
    return where


def agentrt(*args: str | Path, cwd: Path, crash_at: str | None = None) -> Proc:
    """`agentrt ARGS` with this checkout's code and none of the caller's AGENTRT_* variables."""
    return run_cli([str(a) for a in args], child_env(cwd / "counter", crash_at), timeout=180, cwd=cwd)


def ok(ran: Proc) -> Proc:
    assert ran.code == 0, ran.stdout + ran.stderr
    return ran


def export(sid: str, cfg: Path, cwd: Path, *more: str) -> bytes:
    """The export file of `sid` (written with --output, so its bytes are exact)."""
    out = cwd / f"export-{uuid.uuid4().hex[:8]}.jsonl"
    ok(agentrt("export", sid, "--config", cfg, "--output", out, *more, cwd=cwd))
    return out.read_bytes()


def db_init(cfg: Path, cwd: Path) -> None:
    ok(agentrt("db", "init", "--config", cfg, cwd=cwd))


def same_time(text: str) -> str:
    """Relative times ('3 s ago') said a moment apart read the same."""
    return re.sub(r"\d+ (s|min|h|d) ago", "just now", text)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A machine on the files store: the demo (its room holds report.md) of the default tenant, and
    a session of tenant acme-move / user bob paused on an approval; each one's export file."""
    a = tmp_path_factory.mktemp("files-home")
    cfg = config(a / "files.yaml", a / "agentrt")
    done = ok(agentrt("run", "--config", cfg, "--approve-all", "--json", DEMO, cwd=a)).json()
    assert done["status"] == "COMPLETED"
    paused = ok(agentrt("run", "--config", cfg, "--tenant", TENANT, "--user", "bob", "--json", DEMO, cwd=a)).json()
    assert paused["status"] == "PAUSED"
    sid, other = done["session_id"], paused["session_id"]
    return {
        "dir": a,
        "cfg": cfg,
        "base": a / "agentrt",
        "sid": sid,
        "paused": other,
        "one": export(sid, cfg, a),
        "acme": export(other, cfg, a, "--tenant", TENANT),
    }


def room(base: Path, tenant: str, sid: str) -> Path:
    return base / "tenants" / tenant / "sessions" / sid / "workspace"


def test_files_to_postgres_to_files_is_byte_identical_and_runs_from_an_empty_base_dir(
    home: dict[str, Any], tmp_path: Path, dbname: str
) -> None:
    """Imported into PostgreSQL, the session exports the identical file, which imported into
    another files base_dir exports it again; a second import is refused; a machine with an empty
    base_dir shows it as the files machine does and continues it."""
    a, sid = home["dir"], home["sid"]
    pg = config(tmp_path / "pg.yaml", tmp_path / "pg-a", dbname)
    db_init(pg, tmp_path)
    (tmp_path / "one.jsonl").write_bytes(home["one"])
    imported = ok(agentrt("import", tmp_path / "one.jsonl", "--config", pg, cwd=tmp_path))
    assert f"imported session {sid}" in imported.stdout
    from_pg = export(sid, pg, tmp_path)
    assert from_pg == home["one"]
    back = config(tmp_path / "files-c.yaml", tmp_path / "files-c")
    (tmp_path / "from-pg.jsonl").write_bytes(from_pg)
    ok(agentrt("import", tmp_path / "from-pg.jsonl", "--config", back, cwd=tmp_path))
    assert export(sid, back, tmp_path) == home["one"]

    again = agentrt("import", tmp_path / "one.jsonl", "--config", pg, cwd=tmp_path)
    assert again.code == 4 and "already exists" in again.stderr and "nothing was imported" in again.stderr

    fresh = config(tmp_path / "pg-fresh.yaml", tmp_path / "pg-fresh", dbname)
    there = ok(agentrt("show", sid, "--config", home["cfg"], cwd=a))
    here = ok(agentrt("show", sid, "--config", fresh, cwd=tmp_path))
    assert same_time(here.stdout) == same_time(there.stdout)
    listed = ok(agentrt("sessions", "--config", fresh, cwd=tmp_path)).stdout
    assert sid in listed
    cont = ok(agentrt("run", "--config", fresh, "--session", sid, "--approve-all", "--json", "again", cwd=tmp_path))
    assert cont.json()["status"] == "COMPLETED"
    assert (room(tmp_path / "pg-fresh", "default", sid) / "report.md").is_file()
    shown = ok(agentrt("show", sid, "--config", pg, cwd=tmp_path)).stdout  # another machine of the store
    asked = [ln.strip() for ln in shown.splitlines() if ln.strip().startswith("user>")]
    assert asked == [f"user> {DEMO}", "user> again"]


def test_another_tenant_and_user_move_and_resume_from_an_empty_base_dir(
    home: dict[str, Any], tmp_path: Path, dbname: str
) -> None:
    """A paused session of tenant acme-move / user bob keeps both; another user's export is refused
    as on files, the owner's is the identical file; resumed (approved) from a machine whose
    base_dir is empty, its room is restored from the store and the run completes."""
    a, sid = home["dir"], home["paused"]
    pg = config(tmp_path / "pg.yaml", tmp_path / "pg-a", dbname)
    db_init(pg, tmp_path)
    (tmp_path / "acme.jsonl").write_bytes(home["acme"])
    imported = ok(agentrt("import", tmp_path / "acme.jsonl", "--config", pg, "--json", cwd=tmp_path)).json()
    assert imported == [{"session_id": sid, "tenant_id": TENANT, "user_id": "bob"}]

    as_alice = ["--tenant", TENANT, "--user", "alice"]
    on_files = agentrt("export", sid, "--config", home["cfg"], *as_alice, cwd=a)
    on_pg = agentrt("export", sid, "--config", pg, *as_alice, cwd=tmp_path)
    assert on_files.code == on_pg.code == 3 and on_pg.stdout == ""
    assert "user alice" in on_pg.stderr
    assert agentrt("export", sid, "--config", pg, cwd=tmp_path).code == 3  # not of the default tenant
    assert export(sid, pg, tmp_path, "--tenant", TENANT, "--user", "bob") == home["acme"]
    alice = ok(agentrt("sessions", "--config", pg, *as_alice, "--json", cwd=tmp_path)).stdout
    assert sid not in alice

    fresh_base = tmp_path / "pg-fresh"
    fresh = config(tmp_path / "pg-fresh.yaml", fresh_base, dbname)
    bob = ["--tenant", TENANT, "--user", "bob"]
    assert sid in ok(agentrt("sessions", "--config", fresh, *bob, cwd=tmp_path)).stdout
    resumed = ok(agentrt("resume", sid, "--config", fresh, *bob, "--approve", "--json", cwd=tmp_path)).json()
    assert resumed["status"] == "COMPLETED"
    restored = room(fresh_base, TENANT, sid) / "report.md"
    assert restored.read_bytes() == (room(home["base"], TENANT, sid) / "report.md").read_bytes()


def _migrate(pg: Path, base: Path, cwd: Path, crash_at: str | None = None) -> Proc:
    return agentrt("store", "migrate", "--from", "files", "--to", "postgres", "--config", pg, "--from-dir", base,
                   cwd=cwd, crash_at=crash_at)  # fmt: skip


def _all_exports_match(home: dict[str, Any], pg: Path, cwd: Path) -> None:
    assert export(home["sid"], pg, cwd) == home["one"]
    assert export(home["paused"], pg, cwd, "--tenant", TENANT, "--user", "bob") == home["acme"]


def test_migrate_moves_every_session_once(home: dict[str, Any], tmp_path: Path, dbname: str) -> None:
    """Every session of the files base_dir (both tenants) is moved and printed; run again, the
    migrate moves nothing; the sessions export from the store as from the files; a session run on
    in the store since is skipped too."""
    pg = config(tmp_path / "pg.yaml", tmp_path / "pg-a", dbname)
    db_init(pg, tmp_path)
    first = ok(_migrate(pg, home["base"], tmp_path)).stdout
    assert f"moved default/{home['sid']}" in first and f"moved {TENANT}/{home['paused']}" in first
    assert "moved 2 sessions, skipped 0, 0 not moved" in first
    second = ok(_migrate(pg, home["base"], tmp_path)).stdout
    assert "moved 0 sessions, skipped 2, 0 not moved" in second
    assert f"skipped default/{home['sid']}: already in the store, identical" in second
    _all_exports_match(home, pg, tmp_path)
    # Run on in the store, the session is not moved again nor reported as a conflict.
    more = ok(agentrt("run", "--config", pg, "--session", home["sid"], "--approve-all", "--json", "more", cwd=tmp_path))
    assert more.json()["status"] == "COMPLETED"
    third = ok(_migrate(pg, home["base"], tmp_path)).stdout
    assert f"skipped default/{home['sid']}: already in the store, continued there since" in third
    assert "moved 0 sessions, skipped 2, 0 not moved" in third


def test_a_migrate_killed_midway_finishes_when_run_again(home: dict[str, Any], tmp_path: Path, dbname: str) -> None:
    """Killed while uploading the second session, the migrate leaves it unlisted; run again (once
    the killed process's lease lapsed) it skips the first and moves the second whole."""
    pg = config(tmp_path / "pg.yaml", tmp_path / "pg-a", dbname, lease_ttl_s=1)
    db_init(pg, tmp_path)
    killed = _migrate(pg, home["base"], tmp_path, crash_at="mid_import:2")
    assert killed.code == SIGKILL_CODE
    assert killed.stdout.count("moved ") == 1
    listed = ok(agentrt("sessions", "--config", pg, "--json", cwd=tmp_path)).stdout
    assert home["sid"] not in listed  # the cut session is not a session yet
    assert wait_for(lambda: not _held(dbname), timeout_s=30, poll_s=0.2)
    again = ok(_migrate(pg, home["base"], tmp_path)).stdout
    assert "moved 1 sessions, skipped 1, 0 not moved" in again
    _all_exports_match(home, pg, tmp_path)
    assert home["sid"] in ok(agentrt("sessions", "--config", pg, "--json", cwd=tmp_path)).stdout


def _held(dbname: str) -> bool:
    """Whether a lease of the store's database is still held (not lapsed)."""
    with psycopg.connect(f"{SERVER}/{dbname}", autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM session_leases WHERE holder IS NOT NULL AND expires_at > now()")
        return bool(row.fetchone()[0])  # type: ignore[index]
