"""`agentrt sessions` by the index of sessions, as a user drives it: pages, filters, tenants, expiry,
and the index lost, damaged or behind its documents (the doctor names the repair; the repair works)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.session.session import THREAD_METADATA, ChatSession
from agent.session.stores.jsonl import JsonlSessionStore
from checkpointing.fsyncs import atomic_write
from checkpointing.layout import session_index_file
from checkpointing.records import encode_record
from tests.cli.console import agentrt

T0 = datetime.now(UTC) - timedelta(hours=1)


def _seed(
    work: Path, n: int, *, tenant: str = "default", user: str = "user", prefix: str = "s", **fields: object
) -> list[str]:
    """n sessions written through the files store (header + session.json + index row), newest last."""
    store = JsonlSessionStore(work / ".agentrt", fsync="never")
    ids = []
    for i in range(n):
        sid = f"{prefix}{i:03d}"
        s = ChatSession(
            session_id=sid,
            agent_id="agentrt",
            tenant_id=tenant,
            user_id=user,
            last_active_time=T0 + timedelta(seconds=i),
            created_at=T0,
            version=1,
            **fields,  # type: ignore[arg-type]
        )
        store.create_log(s, sync_dir=False)
        store.put(s)
        ids.append(sid)
    store.index.close()
    return ids


def _listed(work: Path, *args: str) -> list[dict[str, object]]:
    ran = agentrt("sessions", "--json", *args, cwd=work)
    assert ran.code == 0, ran.both
    rows: list[dict[str, object]] = json.loads(ran.out)
    return rows


def test_pages_by_cursor_cover_every_session_once(tmp_path: Path) -> None:
    """--limit/--after walk 23 sessions newest first in pages of 5: no duplicate, no gap; the table
    ends with the command for the next page, and the last page has none."""
    ids = _seed(tmp_path, 23)
    seen: list[str] = []
    after: list[str] = []
    while True:
        rows = _listed(tmp_path, "--limit", "5", *after)
        if not rows:
            break
        seen += [str(r["session_id"]) for r in rows]
        after = ["--after", str(rows[-1]["cursor"])]
    assert seen == list(reversed(ids))

    table = agentrt("sessions", "--limit", "20", cwd=tmp_path).out
    hint = re.search(r"more: agentrt sessions --after (\S+)", table)
    assert hint is not None, table
    rest = agentrt("sessions", "--after", hint.group(1), cwd=tmp_path).out
    assert [ln.split()[0] for ln in rest.splitlines()[1:]] == ["s002", "s001", "s000"]
    assert "more:" not in rest


def test_bad_cursor_is_one_line_exit_2(tmp_path: Path) -> None:
    """A cursor no listing printed: one error line naming --after, exit 2, even before any session exists."""
    for work in (tmp_path / "empty", tmp_path):
        work.mkdir(exist_ok=True)
        if work == tmp_path:
            _seed(work, 2)
        ran = agentrt("sessions", "--after", "not-a-cursor", cwd=work)
        assert ran.code == 2, ran.both
        assert "--after" in ran.error_line()


def test_filters_status_user_meta(tmp_path: Path) -> None:
    """--status, --user and --meta KEY=VALUE (repeatable) narrow the listing."""
    _seed(tmp_path, 2, prefix="q3-", context={THREAD_METADATA: {"project": "q3", "team": "red"}})
    _seed(tmp_path, 2, prefix="q4-", context={THREAD_METADATA: {"project": "q4"}})
    _seed(tmp_path, 1, prefix="bob-", user="bob")
    _seed(tmp_path, 1, prefix="p-", status="PAUSED")
    ids = lambda *a: [r["session_id"] for r in _listed(tmp_path, *a)]  # noqa: E731
    assert ids("--meta", "project=q3") == ["q3-001", "q3-000"]
    assert ids("--meta", "project=q3", "--meta", "team=blue") == []
    assert ids("--user", "bob") == ["bob-000"]
    assert ids("--status", "paused") == ["p-000"]
    bad = agentrt("sessions", "--meta", "no-equals-sign", cwd=tmp_path)
    assert bad.code == 2 and "KEY=VALUE" in bad.error_line()


def test_tenants_and_users_never_see_each_other(tmp_path: Path) -> None:
    """A second tenant, and a second user of the same tenant, list only their own sessions."""
    mine = _seed(tmp_path, 3, prefix="a-")
    theirs = _seed(tmp_path, 2, tenant="acme", prefix="b-")
    bobs = _seed(tmp_path, 1, user="bob", prefix="c-")
    assert [r["session_id"] for r in _listed(tmp_path, "--tenant", "acme")] == list(reversed(theirs))
    assert [r["session_id"] for r in _listed(tmp_path, "--user", "user")] == list(reversed(mine))
    assert [r["session_id"] for r in _listed(tmp_path, "--tenant", "acme", "--user", "bob")] == []
    assert [r["session_id"] for r in _listed(tmp_path, "--user", "bob")] == bobs
    assert "no sessions" in agentrt("sessions", "--tenant", "nobody", cwd=tmp_path).out


def test_expired_is_computed_at_read(tmp_path: Path) -> None:
    """An ACTIVE session idle past expire_minutes lists as EXPIRED; --status filters follow."""
    _seed(tmp_path, 1, prefix="old-", expire_minutes=1)  # idle an hour
    _seed(tmp_path, 1, prefix="live-")
    rows = {r["session_id"]: r["status"] for r in _listed(tmp_path)}
    assert rows == {"old-000": "EXPIRED", "live-000": "ACTIVE"}
    assert [r["session_id"] for r in _listed(tmp_path, "--status", "EXPIRED")] == ["old-000"]
    assert [r["session_id"] for r in _listed(tmp_path, "--status", "ACTIVE")] == ["live-000"]


def test_a_real_run_lists_with_its_first_message(tmp_path: Path) -> None:
    """A session made by `agentrt run` lists with its status, turns and first message."""
    ran = agentrt("run", "--json", "--approve-all", "What sold best?", cwd=tmp_path)
    assert ran.code == 0, ran.both
    sid = json.loads(ran.out)["session_id"]
    [row] = _listed(tmp_path)
    assert row["session_id"] == sid and row["first_message"] == "What sold best?" and row["turns"] == 1


def test_deleted_index_fails_the_doctor_and_repair_rebuilds_it(tmp_path: Path) -> None:
    """The index file deleted: `agentrt doctor` FAILs naming `agentrt doctor --repair`; the repair
    rebuilds it and lists every session again."""
    ids = _seed(tmp_path, 4)
    session_index_file(tmp_path / ".agentrt").unlink()
    doctor = agentrt("doctor", cwd=tmp_path)
    assert doctor.code == 1, doctor.both
    assert "FAIL" in doctor.out and "agentrt doctor --repair" in doctor.out
    per_session = agentrt("doctor", ids[0], cwd=tmp_path)
    assert "[FAIL] session_index" in per_session.out and "agentrt doctor --repair" in per_session.out
    repaired = agentrt("doctor", "--repair", cwd=tmp_path)
    assert repaired.code == 0, repaired.both
    assert "rebuilt the session index" in repaired.both and "(4 session(s))" in repaired.both
    assert [r["session_id"] for r in _listed(tmp_path)] == list(reversed(ids))


def test_a_listing_rebuilds_a_missing_index_once(tmp_path: Path) -> None:
    """With the index gone (an upgrade from before it, a lost file), the listing rebuilds it first."""
    ids = _seed(tmp_path, 3)
    session_index_file(tmp_path / ".agentrt").unlink()
    assert [r["session_id"] for r in _listed(tmp_path)] == list(reversed(ids))
    assert session_index_file(tmp_path / ".agentrt").exists()


def test_garbage_index_is_set_aside_and_never_fatal(tmp_path: Path) -> None:
    """Garbage bytes in the index: a run still works, the bytes are kept in .broken, and the listing
    (after a rebuild) shows every session."""
    ids = _seed(tmp_path, 2)
    path = session_index_file(tmp_path / ".agentrt")
    path.write_bytes(b"\x00garbage, not SQLite\xff" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    ran = agentrt("run", "--json", "--approve-all", "Still works", cwd=tmp_path)
    assert ran.code == 0, ran.both
    sid = json.loads(ran.out)["session_id"]
    assert Path(f"{path}.broken").read_bytes().startswith(b"\x00garbage")
    assert [r["session_id"] for r in _listed(tmp_path)] == [sid, *reversed(ids)]


def test_stale_row_is_corrected_on_read(tmp_path: Path) -> None:
    """session.json rewritten behind the index (a crash between the two writes): the listing shows
    the document's state, the doctor WARNs before that, and the row is correct afterwards."""
    [sid] = _seed(tmp_path, 1)
    store = JsonlSessionStore(tmp_path / ".agentrt")
    session = store.get("default", sid)
    assert session is not None
    session.status = "PAUSED"  # type: ignore[assignment]
    session.version += 1
    atomic_write(store.path("default", sid), encode_record(session.to_dict()))
    doctor = agentrt("doctor", sid, cwd=tmp_path)
    assert "[WARN] session_index" in doctor.out and "agentrt doctor --repair" in doctor.out
    [row] = _listed(tmp_path)
    assert row["status"] == "PAUSED"
    assert [r["session_id"] for r in _listed(tmp_path, "--status", "PAUSED")] == [sid]
    got = store.index.get("default", sid)
    assert got is not None and got.version == session.version and got.status == "PAUSED"


def test_a_session_without_a_row_lists_after_the_repair(tmp_path: Path) -> None:
    """A crash between a session's document and its first row: the listing omits it, the doctor
    WARNs on it naming the repair, and `agentrt doctor ID --repair` (or `doctor --repair`) brings it back."""
    import sqlite3

    ids = _seed(tmp_path, 3)
    path = session_index_file(tmp_path / ".agentrt")
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM sessions WHERE session_id = ?", (ids[1],))
    conn.close()
    assert [r["session_id"] for r in _listed(tmp_path)] == [ids[2], ids[0]]
    doctor = agentrt("doctor", ids[1], cwd=tmp_path)
    assert "[WARN] session_index" in doctor.out and "agentrt doctor --repair" in doctor.out, doctor.out
    repaired = agentrt("doctor", ids[1], "--repair", cwd=tmp_path)
    assert "rewrote the session's row" in repaired.both, repaired.both
    assert [r["session_id"] for r in _listed(tmp_path)] == list(reversed(ids))
