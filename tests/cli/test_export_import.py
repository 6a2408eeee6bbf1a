"""`agentrt export` / `agentrt import`: a session moves to another machine (another base_dir) and
reads, checks, continues and resumes there as it did at home; a bad file, a running session or a
taken id is refused with one line and leaves nothing behind."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent.session.lease_file import FileLease
from tests.cli.console import Ran, agentrt

DEMO = "Summarise the 2026 sales by region"


def _sid(ran: Ran) -> str:
    found = re.search(r"session (s-[0-9a-f]+)", ran.both)
    assert found, ran.both
    return found.group(1)


def _same_time(text: str) -> str:
    """Relative times ('3 s ago') said a moment apart read the same."""
    return re.sub(r"\d+ (s|min|h|d) ago", "just now", text)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Machine A: the demo (a forked branch run on too), and a paused session of tenant acme / user bob."""
    a = tmp_path_factory.mktemp("machine-a")
    ran = agentrt("run", "--approve-all", DEMO, cwd=a)
    assert ran.code == 0, ran.both
    sid = _sid(ran)
    shown = json.loads(agentrt("show", "--json", sid, cwd=a).out)
    answer = [e["id"] for e in shown["entries"] if e["type"] == "assistant_message"][-1]
    forked = agentrt("fork", sid, "--from", answer, cwd=a)
    assert forked.code == 0, forked.both
    branch = re.search(r"branch (\S+) starts", forked.out)
    assert branch
    assert agentrt("run", "--session", sid, "--approve-all", "on the fork", cwd=a).code == 0
    paused = agentrt("run", "--tenant", "acme", "--user", "bob", DEMO, cwd=a)
    assert paused.code == 0 and "paused: approval" in paused.out, paused.both
    other = _sid(paused)
    exported = agentrt("export", sid, cwd=a)
    assert exported.code == 0, exported.err
    (a / "one.jsonl").write_text(exported.out, encoding="utf-8")
    exported = agentrt("export", "--tenant", "acme", other, cwd=a)
    assert exported.code == 0, exported.err
    (a / "paused.jsonl").write_text(exported.out, encoding="utf-8")
    return {"dir": a, "sid": sid, "branch": branch.group(1), "paused": other}


def _doctor(sid: str, cwd: Path) -> list[tuple[str, str, str]]:
    """Each check's name, verdict and summary (this machine's base_dir written as BASE)."""
    ran = agentrt("doctor", "--json", sid, cwd=cwd)
    checks = json.loads(ran.out)["checks"]
    return [(c["name"], c["status"], c["evidence"]["summary"].replace(str(cwd), "BASE")) for c in checks]


def test_a_moved_session_reads_checks_and_continues_the_same(home: dict[str, Any], tmp_path: Path) -> None:
    a, sid, branch = home["dir"], home["sid"], home["branch"]
    b = tmp_path / "machine-b"
    b.mkdir()
    ran = agentrt("import", str(a / "one.jsonl"), cwd=b)
    assert ran.code == 0, ran.both
    assert f"imported session {sid}" in ran.out
    for args in (["show", sid], ["show", sid, "--branch", "main"], ["sessions"]):
        there, here = agentrt(*args, cwd=a), agentrt(*args, cwd=b)
        assert here.code == there.code == 0, here.both
        assert _same_time(here.out) == _same_time(there.out)
    assert "2 " in agentrt("sessions", cwd=b).out  # two branches
    assert _doctor(sid, b) == _doctor(sid, a)
    fork_room = Path("tenants/default/sessions", sid, "rooms", branch, "report.md")
    assert (b / ".agentrt" / fork_room).read_bytes() == (a / ".agentrt" / fork_room).read_bytes()

    again = agentrt("export", sid, cwd=b)
    assert again.code == 0, again.err
    assert again.out == (a / "one.jsonl").read_text(encoding="utf-8")  # byte for byte

    turn = agentrt("run", "--session", sid, "--approve-all", "again", cwd=b)
    assert turn.code == 0, turn.both
    assert "status COMPLETED" in turn.err
    assert "turns 3" in agentrt("show", sid, cwd=b).out
    assert "turns 2" in agentrt("show", sid, cwd=a).out  # machine A is untouched
    tokens = [
        json.loads(line).get("fence")
        for line in (b / ".agentrt" / fork_room.parents[2] / "events.jsonl").read_text().splitlines()
    ]
    home_tokens = [
        json.loads(line).get("fence")
        for line in (a / ".agentrt" / fork_room.parents[2] / "events.jsonl").read_text().splitlines()
    ]
    new = [t for t in tokens[len(home_tokens) :] if isinstance(t, int)]
    assert new and min(new) > max(t for t in home_tokens if isinstance(t, int))  # fencing stays monotonic


def test_a_paused_session_of_another_tenant_resumes_on_the_other_machine(home: dict[str, Any], tmp_path: Path) -> None:
    a, sid = home["dir"], home["paused"]
    c = tmp_path / "machine-c"
    c.mkdir()
    ran = agentrt("import", str(a / "paused.jsonl"), cwd=c)
    assert ran.code == 0, ran.both
    assert "tenant acme  user bob" in ran.out
    assert sid in agentrt("sessions", "--tenant", "acme", "--user", "bob", cwd=c).out
    assert "no sessions" in agentrt("sessions", cwd=c).out  # the default tenant has none
    assert agentrt("show", sid, cwd=c).code == 3  # not the default tenant's
    assert "pending approval" in agentrt("show", "--tenant", "acme", sid, cwd=c).out

    done = agentrt("resume", "--tenant", "acme", sid, "--approve-all", cwd=c)
    assert done.code == 0, done.both
    assert "status COMPLETED" in done.err
    folder = c / ".agentrt/tenants/acme/sessions" / sid
    intents = Counter(
        rec["tool_call_id"]
        for rec in map(json.loads, (folder / "journal.jsonl").read_text().splitlines())
        if rec.get("kind") == "intent"
    )
    assert intents and max(intents.values()) == 1  # no tool ran twice (the write before the pause included)
    assert (folder / "workspace/outbox/team-report.md").is_file()
    assert "PAUSED" in agentrt("sessions", "--tenant", "acme", cwd=a).out  # still paused at home


# -- refusals ------------------------------------------------------------------------------------------


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _sealed(path: Path, records: list[dict[str, Any]], sessions: int = 1) -> Path:
    """Write `records` (the end line recomputed), as a hostile but well-formed export would be."""
    body = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records[:-1]).encode()
    end = {"kind": "end", "lines": len(records) - 1, "sessions": sessions, "sha256": hashlib.sha256(body).hexdigest()}
    path.write_bytes(body + json.dumps(end).encode() + b"\n")
    return path


def _refused(ran: Ran, code: int, *words: str) -> str:
    assert ran.code == code, ran.both
    line = ran.error_line()
    for w in words:
        assert w in line, line
    return line


def test_a_running_session_is_refused_by_export_and_import(home: dict[str, Any], tmp_path: Path) -> None:
    a, sid = home["dir"], home["sid"]
    lease = FileLease(a / ".agentrt")
    grant = lease.acquire("default", sid, ttl_s=60)
    try:
        ran = agentrt("export", sid, cwd=a)
        _refused(ran, 4, sid, "in use", "export again")
        assert ran.out == ""
    finally:
        lease.release(grant)
    b = tmp_path / "b"
    b.mkdir()
    assert agentrt("import", str(a / "one.jsonl"), cwd=b).code == 0
    _refused(agentrt("import", str(a / "one.jsonl"), cwd=b), 4, sid, "already exists")
    lease = FileLease(b / ".agentrt")
    grant = lease.acquire("default", sid, ttl_s=60)
    try:
        _refused(agentrt("import", str(a / "one.jsonl"), cwd=b), 4, sid, "in use")
    finally:
        lease.release(grant)


def test_unknown_and_invalid_ids_for_export(home: dict[str, Any]) -> None:
    a = home["dir"]
    ran = agentrt("export", home["sid"], "s-nothere", cwd=a)
    _refused(ran, 3, "s-nothere", "agentrt sessions")
    assert ran.out == ""  # nothing half written
    _refused(agentrt("export", "../etc", cwd=a), 2, "invalid session id")
    _refused(agentrt("export", "--tenant", "acme", home["sid"], cwd=a), 3, home["sid"])


def _hostile(home: dict[str, Any], tmp_path: Path) -> dict[str, Path]:
    records = _lines(home["dir"] / "one.jsonl")
    files: dict[str, Path] = {}
    cut = (home["dir"] / "one.jsonl").read_bytes()
    files["cut"] = tmp_path / "cut.jsonl"
    files["cut"].write_bytes(cut[: len(cut) // 2])
    files["cut-at-a-line"] = tmp_path / "cut-line.jsonl"
    files["cut-at-a-line"].write_bytes(b"".join(cut.splitlines(keepends=True)[:-3]))
    files["empty"] = tmp_path / "empty.jsonl"
    files["empty"].write_bytes(b"")
    garbled = bytearray(cut)
    garbled[len(garbled) // 3] ^= 0x01
    files["garbled"] = tmp_path / "garbled.jsonl"
    files["garbled"].write_bytes(bytes(garbled))
    record = next(i for i, r in enumerate(records) if r["kind"] == "record")
    changed = [dict(r) for r in records]
    changed[record]["line"] = changed[record]["line"].replace("a", "b", 1)
    files["changed-record"] = _sealed(tmp_path / "changed.jsonl", changed)
    escape = [dict(r) for r in records]
    escape[1]["session"] = "../../../escape"
    files["id-escape"] = _sealed(tmp_path / "id.jsonl", escape)
    for name, path in (("room-escape", "../../../../escaped.txt"), ("room-absolute", "/tmp/escaped.txt")):
        room = [
            *records[:-1],
            {"kind": "file", "branch": "main", "path": path, "mode": 420, "data": "aGk="},
            records[-1],
        ]
        files[name] = _sealed(tmp_path / f"{name}.jsonl", room)
    branch = [*records[:-1], {"kind": "dir", "branch": "../..", "path": "x", "mode": 493}, records[-1]]
    files["branch-escape"] = _sealed(tmp_path / "branch.jsonl", branch)
    return files


def test_a_bad_export_file_is_refused_and_creates_nothing(home: dict[str, Any], tmp_path: Path) -> None:
    for name, path in _hostile(home, tmp_path).items():
        target = tmp_path / f"machine-{name}"
        target.mkdir()
        line = _refused(agentrt("import", str(path), cwd=target), 2, "nothing was imported")
        assert list(target.iterdir()) == [], (name, line)
    assert not list(tmp_path.rglob("escaped.txt")) and not list(tmp_path.parent.rglob("escape"))
    nothing = tmp_path / "machine-none"
    nothing.mkdir()
    _refused(agentrt("import", str(tmp_path / "no-such.jsonl"), cwd=nothing), 2, "no-such.jsonl")
    assert list(nothing.iterdir()) == []


def _sql(base: Path, query: str, *params: str) -> list[tuple[Any, ...]]:
    import sqlite3

    with sqlite3.connect(base / ".agentrt" / "agentrt.db") as conn:
        return list(conn.execute(query, params))


def test_an_interrupted_import_of_two_sessions_leaves_nothing_then_imports_both(
    home: dict[str, Any], tmp_path: Path
) -> None:
    a = home["dir"]
    one, paused = _lines(a / "one.jsonl"), _lines(a / "paused.jsonl")
    both = _sealed(tmp_path / "both.jsonl", [{**one[0], "sessions": 2}, *one[1:-1], *paused[1:-1], one[-1]], 2)
    target = tmp_path / "machine"
    target.mkdir()
    ran = agentrt("import", str(both), cwd=target, extra_env={"AGENTRT_INTERRUPT_AT": "mid_import:2"})
    assert ran.code == 130, ran.both
    assert list(target.iterdir()) == []  # the first session, already in place, was taken back too

    ran = agentrt("import", str(both), cwd=target)
    assert ran.code == 0, ran.both
    assert home["sid"] in agentrt("sessions", cwd=target).out
    assert home["paused"] in agentrt("sessions", "--tenant", "acme", cwd=target).out
    for sid in (home["sid"], home["paused"]):  # the SQL session row and page messages, as at home
        query = "SELECT count(*) FROM chat_messages WHERE session_id = ?"
        assert _sql(target, query, sid) == _sql(a, query, sid)
        query = "SELECT tenant_id, user_id, status, version FROM sessions WHERE session_id = ?"
        assert _sql(target, query, sid) == _sql(a, query, sid)


def test_import_into_postgresql_and_redis_lists_continues_and_exports_the_same(
    home: dict[str, Any], tmp_path: Path
) -> None:
    """The production set-up (PRIMARY over PostgreSQL, the Redis lease): the SQL session table is the
    listing there, so the import must write the row; export takes the Redis lease and gives it back."""
    import subprocess
    import uuid

    import redis

    from tests.cli.console import ROOT

    schema = f"export_{uuid.uuid4().hex[:10]}"
    psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qc"]
    subprocess.run([*psql, f"CREATE SCHEMA {schema}"], check=True)
    env = {
        "AGENTRT_DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}",
        "AGENTRT_REDIS_URL": "redis://127.0.0.1:6379/0",
        "AGENTRT_BASE_DIR": str(tmp_path / "volume"),
    }
    config = ["--config", str(ROOT / "configs/production.yaml")]
    sid, a = home["sid"], home["dir"]
    try:
        assert agentrt("db", "init", *config, cwd=tmp_path, extra_env=env).code == 0
        ran = agentrt("import", *config, str(a / "one.jsonl"), cwd=tmp_path, extra_env=env)
        assert ran.code == 0, ran.both
        listed = agentrt("sessions", *config, cwd=tmp_path, extra_env=env)
        assert sid in listed.out, listed.both
        assert _same_time(listed.out) == _same_time(agentrt("sessions", cwd=a).out)
        assert _same_time(agentrt("show", *config, sid, cwd=tmp_path, extra_env=env).out) == _same_time(
            agentrt("show", sid, cwd=a).out
        )
        again = agentrt("export", *config, sid, cwd=tmp_path, extra_env=env)
        assert again.code == 0, again.err
        assert again.out == (a / "one.jsonl").read_text(encoding="utf-8")
        refused = agentrt("import", *config, str(a / "one.jsonl"), cwd=tmp_path, extra_env=env)
        _refused(refused, 4, sid, "already exists")
    finally:
        subprocess.run([*psql, f"DROP SCHEMA IF EXISTS {schema} CASCADE"], check=True)
        client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        keys = list(client.scan_iter(match=f"*{sid}*", count=500))
        if keys:
            client.delete(*keys)
