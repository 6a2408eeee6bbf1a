"""Branches and forks through the installed `agentrt` command (issue 13 §2), as a user runs them.

A paused session is ended, forked from an earlier answer and run: the new turn starts from the fork
point's checkpoint on the new branch, in the branch's own room; the paused run of the old branch is
never resumed onto it; the old branch's entries, page history (SQL rows too) and room files stay
byte-identical; `show` lists both branches. Each branch's page history is rebuilt from events.jsonl
alone. A second user of the same tenant can neither read nor fork the session. A SIGKILL at a
random instant of the first turn on a fork resumes on the fork. Configs: the built-in defaults
(no `--config`, as configs/default.yaml) and a production.yaml-like one with PostgreSQL and Redis.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from agent.runner.branches import branch_pages
from checkpointing.entry_log import EventLog
from tests.cli.console import Ran, agentrt, env, script
from tests.integration.test_stores_support import DATABASE_URL, REDIS_URL
from tests.support.drills import size
from tests.support.runners import make_config

ALICE, BOB = "alice", "bob"
KILLS = size("AGENTRT_FORK_KILLS", sample=3, full=20)
SEED = 20261203


class User:
    """`agentrt` as one user of one tenant, in one directory, with one config (None: built-in defaults)."""

    def __init__(self, cwd: Path, tenant: str, user: str, config: Path | None) -> None:
        self.cwd, self.tenant, self.user, self.config = cwd, tenant, user, config

    def args(self, *args: str) -> list[str]:
        """The command line of `agentrt ARGS` for this user."""
        extra = ["--tenant", self.tenant, "--user", self.user]
        if self.config is not None:
            extra += ["--config", str(self.config)]
        return [args[0], *extra, *args[1:]]

    def __call__(self, *args: str) -> Ran:
        return agentrt(*self.args(*args), cwd=self.cwd)

    def ok(self, *args: str) -> Ran:
        """Run and require exit 0."""
        ran = self(*args)
        assert ran.code == 0, f"agentrt {' '.join(args)}: {ran.err}"
        return ran

    def json(self, *args: str) -> Any:
        """Run with --json and decode stdout."""
        return json.loads(self.ok(*args, "--json").out)

    def as_user(self, user: str) -> User:
        """The same tenant, another user."""
        return User(self.cwd, self.tenant, user, self.config)


@pytest.fixture(params=["default", "postgres"])
def alice(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[User]:
    """A user of a fresh tenant in a fresh directory; on `postgres`, page rows go to a schema of its own."""
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    cwd = tmp_path / "work"
    cwd.mkdir()
    if request.param == "default":
        yield User(cwd, tenant, ALICE, None)
        return
    schema = f"agentrt_forks_{uuid.uuid4().hex[:10]}"
    engine = _engine(DATABASE_URL)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    cfg = make_config(
        tmp_path,
        base="production.yaml",
        persistence={
            "base_dir": str(cwd / ".agentrt"),
            "database_url": _url(DATABASE_URL, schema),
            "redis_url": REDIS_URL,
            "store": "files",
            "lease": "file",
        },
        workers={"broker_url": None, "result_backend": None},
    )
    user = User(cwd, tenant, ALICE, cfg)
    user.schema = schema  # type: ignore[attr-defined]
    assert agentrt("db", "upgrade", "--config", str(cfg), cwd=cwd).code == 0
    try:
        yield user
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"*{tenant}*", count=1000))
        if keys:
            client.delete(*keys)


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def _url(base: str, schema: str) -> str:
    return f"{base}?options=-csearch_path%3D{schema}"


def _sql_rows(u: User, sid: str) -> dict[str, list[tuple[str, str, str]]]:
    """chat_messages rows of the session by branch (message_id, role, content), or {} without SQL."""
    schema = getattr(u, "schema", None)
    if schema is None:
        return {}
    engine = _engine(_url(DATABASE_URL, schema))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT branch_id, message_id, role, content FROM chat_messages "
                    "WHERE tenant_id = :t AND session_id = :s ORDER BY ts, message_id"
                ),
                {"t": u.tenant, "s": sid},
            ).all()
    finally:
        engine.dispose()
    out: dict[str, list[tuple[str, str, str]]] = {}
    for branch, mid, role, content in rows:
        out.setdefault(str(branch), []).append((str(mid), str(role), str(content)))
    return out


def _session_dir(u: User, sid: str) -> Path:
    return u.cwd / ".agentrt" / "tenants" / u.tenant / "sessions" / sid


def _tree(root: Path) -> dict[str, str]:
    """Every file under `root` with the sha256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _raw_lines(u: User, sid: str, branch: str) -> list[bytes]:
    """The stored lines of events.jsonl whose entry is on `branch`."""
    lines = (_session_dir(u, sid) / "events.jsonl").read_bytes().splitlines()
    return [ln for ln in lines if f'"branch_id":"{branch}"'.encode() in ln]


def _paused_session(u: User) -> tuple[str, str]:
    """Turn one approved to its end, turn two paused at its approval: (session id, turn one's answer entry)."""
    first = u.json("run", "turn one")
    sid = first["session_id"]
    assert first["status"] == "PAUSED"
    assert u.json("resume", sid, "--approve")["status"] == "COMPLETED"
    second = u.json("run", "--session", sid, "turn two")
    assert second["status"] == "PAUSED" and second["pending_approval"][0]["name"] == "publish_report"
    shown = u.json("show", sid, "--last", "1000")
    answer = next(e["id"] for e in shown["entries"] if e["type"] == "assistant_message")
    return sid, answer


def _pages(shown: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    return {b["branch_id"]: [(m["role"], m["content"]) for m in b["page"]] for b in shown["branch_info"]}


def test_paused_end_fork_run_continues_on_the_fork_and_leaves_the_old_branch_alone(alice: User) -> None:
    """PAUSED -> end -> fork from turn one's answer -> run: the fork's turn, its room, its approval;
    the old branch's entries, page rows and room byte-identical; both branches shown; a second user
    of the tenant sees nothing; each branch's page history rebuilt from events.jsonl alone."""
    sid, answer = _paused_session(alice)
    bob = alice.as_user(BOB)
    assert bob("fork", sid, "--from", answer).code == 3  # not found for another user of the tenant
    assert bob("show", sid).code == 3 and bob("doctor", sid).code != 0

    alice.ok("end", sid)
    main_lines = _raw_lines(alice, sid, "main")
    main_room = _tree(_session_dir(alice, sid) / "workspace")
    main_rows = _sql_rows(alice, sid).get("main")
    main_page = _pages(alice.json("show", sid))["main"]
    assert [c for _, c in main_page][0::2] == ["turn one", "turn two"]

    forked = alice.json("fork", sid, "--from", answer)
    branch = forked["branch_id"]
    third = alice.json("run", "--session", sid, "turn three")
    # The turn ran on the fork from turn one's end: it asks for its own approval, not turn two's.
    assert third["status"] == "PAUSED", third
    shown = alice.json("show", sid)
    assert shown["checkpoint"]["branch_id"] == branch and shown["checkpoint"]["next"] == ["acting"]
    text = alice.ok("show", sid).out
    assert f"forked from main at entry {answer}" in text and "approve: agentrt resume" in text
    done = alice.json("resume", sid, "--approve")
    assert done["status"] == "COMPLETED" and "published" in done["answer"]

    shown = alice.json("show", sid)
    session = shown["session"]
    assert session["current_branch_id"] == branch and session["room_id"] == branch
    assert session["sandbox_workspace"] == "."
    pages = _pages(shown)
    assert [c for _, c in pages[branch]][0::2] == ["turn one", "turn three"]
    assert pages["main"] == main_page
    # The old branch: not one entry, row or file changed; its paused run stayed where it was.
    assert _raw_lines(alice, sid, "main") == main_lines
    assert _tree(_session_dir(alice, sid) / "workspace") == main_room
    assert _sql_rows(alice, sid).get("main") == main_rows
    main_text = alice.ok("show", sid, "--branch", "main").out
    assert "never resumed" in main_text and "approve: agentrt resume" not in main_text
    room = _session_dir(alice, sid) / "rooms" / branch
    assert (room / "report.md").is_file() and (room / "outbox" / "team-report.md").is_file()

    # Rooms: one made per branch, logged as sandbox_created on its branch.
    log = EventLog(alice.cwd / ".agentrt", alice.tenant, sid)
    created = {e.branch_id: e.payload for e in log.entries() if e.type == "sandbox_created"}
    assert created[branch]["room_id"] == branch and created[branch]["checkpoint_id"] == forked["checkpoint_id"]
    assert created["main"]["room_id"] == "workspace"

    # The event log alone: copy events.jsonl and the blobs elsewhere, drop every projection.
    alone = alice.cwd / "alone"
    copy = alone / "tenants" / alice.tenant / "sessions" / sid
    copy.mkdir(parents=True)
    shutil.copy2(_session_dir(alice, sid) / "events.jsonl", copy / "events.jsonl")
    shutil.copytree(alice.cwd / ".agentrt" / "blobs", alone / "blobs")
    rebuilt = branch_pages(EventLog(alone, alice.tenant, sid))
    assert {b: [(m["role"], m["content"]) for m in page] for b, page in rebuilt.items()} == pages
    rows = _sql_rows(alice, sid)
    if rows:  # PostgreSQL holds each branch's own rows, in order: the log's messages of that branch
        for b, page in rebuilt.items():
            own = [(m["entry_id"], m["role"], m["content"]) for m in page if m["entry_id"] in {r[0] for r in rows[b]}]
            assert rows[b] == own


def test_doctor_and_resume_read_the_fork_not_the_abandoned_run(alice: User) -> None:
    """On a fresh fork of a paused session: resume has nothing to resume, the doctor sees no waiting
    approval (the old branch's stays on the old branch), and a plain turn is not refused."""
    sid, answer = _paused_session(alice)
    alice.ok("end", sid)
    alice.ok("fork", sid, "--from", answer)
    resumed = alice("resume", sid, "--approve")
    assert resumed.code != 0 and "has not run a turn yet" in resumed.error_line()
    report = alice.json("doctor", sid)
    recovery = next(c["evidence"] for c in report["checks"] if c["name"] == "recovery")
    assert recovery["next_nodes"] == [] and "human" not in recovery["summary"], recovery
    assert alice.json("run", "--session", sid, "turn three")["status"] == "PAUSED"


def _spawn_killed(u: User, args: list[str], delay: float) -> int:
    """Start `agentrt ARGS`, SIGKILL it after `delay` seconds unless it ended; its exit code."""
    proc = subprocess.Popen(
        [script(), *u.args(*args)], cwd=u.cwd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        return proc.wait(timeout=delay)  # the random instant itself; a turn that ended sooner is not waited out
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    return proc.wait(timeout=60)


@pytest.mark.parametrize("alice", ["default"], indirect=True)
def test_sigkill_in_the_first_turn_on_a_fork_resumes_on_the_fork(alice: User, tmp_path: Path) -> None:
    """SIGKILL at a random instant of the fork's first turn, then `agentrt resume`: the turn continues
    on the fork from its fork point; the old branch's entries and room never change. The paused,
    ended and forked session is made once; each kill runs in a copy of its folder."""
    sid, answer = _paused_session(alice)
    alice.ok("end", sid)
    branch = alice.json("fork", sid, "--from", answer)["branch_id"]
    rng = random.Random(SEED)
    for kill in range(KILLS):
        cwd = tmp_path / f"kill-{kill}"
        shutil.copytree(alice.cwd, cwd, symlinks=True)
        u = User(cwd, alice.tenant, alice.user, alice.config)
        main_lines = _raw_lines(u, sid, "main")
        main_room = _tree(_session_dir(u, sid) / "workspace")
        _spawn_killed(u, ["run", "--session", sid, "turn three"], rng.uniform(0.5, 6.0))
        result: dict[str, Any] = {"status": "UNKNOWN"}
        for _attempt in range(6):
            if result["status"] == "COMPLETED":
                break
            if result["status"] == "PAUSED":
                result = u.json("resume", sid, "--approve")
                continue
            ran = u("resume", sid, "--json")
            if ran.code == 0:
                result = json.loads(ran.out)
            elif "has not run a turn yet" in ran.err:  # killed before the turn was recorded: run it again
                result = u.json("run", "--session", sid, "turn three")
            else:
                assert "waiting for a human decision" in ran.err, ran.err
                result = {"status": "PAUSED"}
        assert result is not None and result["status"] == "COMPLETED", result
        shown = u.json("show", sid)
        assert shown["session"]["current_branch_id"] == branch
        assert [c for _, c in _pages(shown)[branch]][0::2] == ["turn one", "turn three"]
        assert _raw_lines(u, sid, "main") == main_lines
        assert _tree(_session_dir(u, sid) / "workspace") == main_room
        shutil.rmtree(cwd)
