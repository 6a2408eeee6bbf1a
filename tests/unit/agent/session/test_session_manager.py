"""ChatSessionManager on the embedded layers (L1 + JSONL + SQLite): modes, fill, expiry, branches."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from agent.core.errors import ConfigError, NotFound, SessionExists, SessionNotActive, SessionNotFound
from agent.session.manager import ChatSessionManager, Mode
from agent.session.session import SessionDocumentCorrupt, SessionStatus, utcnow
from agent.session.stores.jsonl import JsonlSessionStore
from agent.session.stores.memory_cache import MemorySessionStore
from agent.session.stores.sql import SqlSessionStore, sqlite_url


def manager(tmp_path: Path, mode: Mode = "PRIMARY", sql: bool = True) -> ChatSessionManager:
    """A manager over fresh embedded layers under tmp_path."""
    return ChatSessionManager(
        mode,
        MemorySessionStore(),
        None,
        SqlSessionStore(sqlite_url(tmp_path), create=True) if sql else None,
        JsonlSessionStore(tmp_path),
        retry_interval_s=0,
    )


def test_primary_writes_jsonl_sql_and_l1(tmp_path: Path) -> None:
    """PRIMARY saves to session.json, the SQL row and L1."""
    m = manager(tmp_path)
    s = m.create("t1", "agent", "u1", "s1")
    assert m.jsonl.get("t1", "s1") == s
    assert m.sql is not None and m.sql.get("t1", "s1") == s
    assert m.l1.get("t1", "s1") == s
    assert (tmp_path / "tenants/t1/sessions/s1/events.jsonl").exists()


def test_primary_read_order_by_removal(tmp_path: Path) -> None:
    """PRIMARY reads L1, then JSONL, then SQL; each removal shifts the hit one layer down."""
    m = manager(tmp_path)
    m.create("t1", "agent", "u1", "s1")
    m.get("t1", "s1")
    assert m.last_read_trace == [("L1", "hit")]
    m.l1.delete("t1", "s1")
    m.get("t1", "s1")
    assert m.last_read_trace == [("L1", "miss"), ("JSONL", "hit")]
    m.l1.delete("t1", "s1")
    m.jsonl.delete("t1", "s1")
    (tmp_path / "tenants/t1/sessions/s1/events.jsonl").unlink()
    m.get("t1", "s1")
    assert m.last_read_trace == [("L1", "miss"), ("JSONL", "miss"), ("SQL", "hit")]
    assert m.jsonl.get("t1", "s1") is not None and m.l1.get("t1", "s1") is not None  # filled


def test_jsonl_only_never_touches_sql(tmp_path: Path) -> None:
    """JSONL_ONLY reads L1 then JSONL and has no session table."""
    m = manager(tmp_path, "JSONL_ONLY", sql=False)
    m.create("t1", "agent", "u1", "s1")
    m.l1.clear()
    m.get("t1", "s1")
    assert m.last_read_trace == [("L1", "miss"), ("JSONL", "hit")]
    assert not (tmp_path / "agentrt.db").exists()


def test_session_is_rebuilt_from_the_log_when_session_json_is_lost(tmp_path: Path) -> None:
    """Without session.json the header and the entries give identity, leaf and page history."""
    m = manager(tmp_path, "JSONL_ONLY", sql=False)
    s = m.create("t1", "agent", "u1", "s1")
    m.memory.add_user_turn(s, "hello")
    m.memory.add_assistant_message(s, "hi there")
    m.save(s)
    m.memory.record(s, "run_start", {"run_id": "r1"})
    m.memory.record(s, "run_pause", {"run_id": "r1"})
    m.jsonl.delete("t1", "s1")
    m.l1.clear()
    got = m.get("t1", "s1", "u1")
    assert m.last_read_trace == [("L1", "miss"), ("JSONL", "miss"), ("JSONL", "rebuilt")]
    assert got.current_leaf_entry_id == s.current_leaf_entry_id
    assert [(x.role, x.content) for x in got.messages] == [("user", "hello"), ("assistant", "hi there")]
    assert (got.loop_count, got.last_run_id, got.status) == (1, "r1", SessionStatus.PAUSED)
    assert m.jsonl.get("t1", "s1") is not None  # the rebuilt session was written back
    with pytest.raises(SessionNotFound):
        m.get("t1", "s1", "someone-else")


def test_unsaved_leaf_is_taken_from_the_log(tmp_path: Path) -> None:
    """Events appended after the last save move the leaf when the session is read back from JSONL."""
    m = manager(tmp_path, "JSONL_ONLY", sql=False)
    s = m.create("t1", "agent", "u1", "s1")
    e = m.memory.record(s, "run_start", {"run_id": "r1"})
    m.l1.clear()
    assert m.get("t1", "s1").current_leaf_entry_id == e.id


def test_other_tenant_and_user_read_as_not_found(tmp_path: Path) -> None:
    """The same session id under another tenant, or with another user, is not found."""
    m = manager(tmp_path)
    m.create("t1", "agent", "u1", "same")
    m.create("t2", "agent", "u2", "same")
    assert m.get("t1", "same").user_id == "u1" and m.get("t2", "same").user_id == "u2"
    with pytest.raises(SessionNotFound):
        m.get("t1", "same", user_id="u2")
    with pytest.raises(SessionNotFound):
        m.get("t3", "same")
    assert [s.tenant_id for s in m.list("t2")] == ["t2"]


def test_expired_session_is_saved_as_expired_when_read(tmp_path: Path) -> None:
    """An idle ACTIVE session is EXPIRED on the next read, in every layer."""
    m = manager(tmp_path)
    s = m.create("t1", "agent", "u1", "s1", expire_minutes=5)
    s.last_active_time = utcnow() - timedelta(minutes=6)
    m.save(s)
    assert m.get("t1", "s1").status is SessionStatus.EXPIRED
    got = m.sql.get("t1", "s1") if m.sql else None
    assert got is not None and got.status is SessionStatus.EXPIRED
    with pytest.raises(SessionNotActive, match="EXPIRED"):
        m.start_turn(m.get("t1", "s1"))


def test_start_turn_counts_loops_until_max(tmp_path: Path) -> None:
    """start_turn counts each turn and refuses the one past max_loops."""
    m = manager(tmp_path)
    s = m.create("t1", "agent", "u1", "s1", max_loops=2)
    m.start_turn(s)
    m.start_turn(s)
    with pytest.raises(SessionNotActive, match="max_loops"):
        m.start_turn(s)
    assert m.get("t1", "s1").loop_count == 2


def test_end_pause_and_status_helpers(tmp_path: Path) -> None:
    """end/pause/reactivate/mark_run persist the status a user then sees."""
    m = manager(tmp_path)
    m.create("t1", "agent", "u1", "s1")
    m.pause("t1", "s1")
    with pytest.raises(SessionNotActive, match="resume"):
        m.start_turn(m.get("t1", "s1"))
    m.reactivate(m.get("t1", "s1"))
    m.mark_run(m.get("t1", "s1"), "r1", "RUNNING")  # a run starts RUNNING (the lifecycle's run table)
    s = m.mark_run(m.get("t1", "s1"), "r1", "COMPLETED")
    assert (s.last_run_id, s.last_run_status) == ("r1", "COMPLETED")
    assert m.end("t1", "s1").status is SessionStatus.ENDED
    m.l1.clear()
    assert m.get("t1", "s1").status is SessionStatus.ENDED


def test_create_refuses_duplicates_and_bad_ids(tmp_path: Path) -> None:
    """A second create with the same id is a conflict (SessionExists), an unsafe id a clear ConfigError."""
    m = manager(tmp_path)
    m.create("t1", "agent", "u1", "s1")
    with pytest.raises(SessionExists, match="already exists"):
        m.create("t1", "agent", "u1", "s1")
    with pytest.raises(ConfigError, match="invalid"):
        m.create("t1", "agent", "u1", "../../x")
    with pytest.raises(ConfigError):
        m.get("t:1", "s1")


def test_fork_keeps_the_original_branch_byte_identical(tmp_path: Path) -> None:
    """Forking at an earlier entry and running a turn leaves the old entries and tool results as they were."""
    m = manager(tmp_path)
    s = m.create("t1", "agent", "u1", "s1")
    first = m.memory.add_user_turn(s, "turn one")
    m.memory.record(s, "tool_call", {"tool_call_id": "c1", "name": "read"})
    m.memory.record(s, "tool_result", {"tool_call_id": "c1", "content": "x" * 20000})
    m.memory.add_assistant_message(s, "answer one")
    m.memory.add_user_turn(s, "turn two")
    m.save(s)
    old_leaf = s.current_leaf_entry_id
    log_path = tmp_path / "tenants/t1/sessions/s1/events.jsonl"
    before = log_path.read_bytes()
    events = m.event_log("t1", "s1")
    old_path = [events.raw(e.id) for e in events.path_to_root(old_leaf)]

    branch = m.fork(s, first.entry_id or "", reason="try again")
    m.memory.add_assistant_message(s, "another answer")
    m.memory.record(s, "tool_result", {"tool_call_id": "c2", "content": "new"})
    m.save(s)

    assert log_path.read_bytes().startswith(before)
    assert [events.raw(e.id) for e in events.path_to_root(old_leaf)] == old_path
    assert s.current_branch_id == branch != "main"
    assert [m.content for m in m.history(s)] == ["turn one", "another answer"]
    got = m.get("t1", "s1")
    assert [x.content for x in got.messages] == ["turn one", "another answer"]
    old = got.model_copy(update={"current_leaf_entry_id": old_leaf})
    assert [x.content for x in m.history(old)] == ["turn one", "answer one", "turn two"]
    assert [x.content for x in m.memory.sql_history(got)] == ["turn one", "another answer"]


def test_fork_refuses_paused_sessions_and_unknown_entries(tmp_path: Path) -> None:
    """Fork needs a known entry (an unknown one is not found), and a PAUSED session must be resumed or ended first."""
    m = manager(tmp_path)
    s = m.create("t1", "agent", "u1", "s1")
    e = m.memory.add_user_turn(s, "hello")
    with pytest.raises(NotFound, match="not in session"):
        m.fork(s, "0190aaaa-0000-7000-8000-000000000000")
    m.save(s)
    m.pause("t1", "s1")
    paused = m.get("t1", "s1")
    with pytest.raises(SessionNotActive, match="end it"):
        m.fork(paused, e.entry_id or "")
    ended = m.end("t1", "s1")
    m.fork(ended, e.entry_id or "")
    assert m.get("t1", "s1").status is SessionStatus.ACTIVE


def test_l1_is_bounded_and_expires_by_ttl() -> None:
    """L1 evicts the least recently used beyond its size and forgets entries past the TTL."""
    now = [0.0]
    l1 = MemorySessionStore(max_entries=2, ttl_seconds=10, clock=lambda: now[0])
    from agent.session.session import ChatSession

    def mk(i: str) -> ChatSession:
        return ChatSession(session_id=i, agent_id="a", tenant_id="t", user_id="u")

    l1.put(mk("a"))
    l1.put(mk("b"))
    l1.get("t", "a")
    l1.put(mk("c"))
    assert l1.get("t", "b") is None and l1.get("t", "a") is not None
    now[0] = 11
    assert l1.get("t", "a") is None and len(l1) == 1


def test_mirror_repairs_sql_from_a_newer_jsonl_mirror(tmp_path: Path) -> None:
    """A save that reached only the JSONL mirror (SQL down, process gone) wins over the older SQL row."""
    m = manager(tmp_path, "MIRROR")
    s = m.create("t1", "agent", "u1", "s1")
    newer = s.model_copy(update={"version": s.version + 3, "context": {"late": True}})
    m.jsonl.put(newer)
    fresh = manager(tmp_path, "MIRROR")
    got = fresh.get("t1", "s1")
    assert got.context == {"late": True}
    assert fresh.last_read_trace == [("L1", "miss"), ("SQL", "hit"), ("JSONL", "newer")]
    assert fresh.sql is not None and fresh.sql.get("t1", "s1") == newer


def _flip_user(path: Path) -> bytes:
    """One bit of session.json flipped (its user "u1" -> "u0"); returns the damaged bytes."""
    damaged = path.read_bytes().replace(b'"u1"', b'"u0"')
    path.write_bytes(damaged)
    return damaged


@pytest.mark.parametrize("mode", ["PRIMARY", "JSONL_ONLY"])
def test_a_damaged_session_file_stops_the_read_where_jsonl_is_the_truth(tmp_path: Path, mode: Mode) -> None:
    """A flipped bit in session.json raises SessionDocumentCorrupt naming the file and `agentrt
    doctor`, in one line: SQL's copy is not returned in its place. Only that session is refused,
    the layer stays up, and the file is left as it was."""
    m = manager(tmp_path, mode, sql=mode == "PRIMARY")
    m.create("t1", "agent", "u1", "bad")
    m.create("t1", "agent", "u1", "good")
    path = tmp_path / "tenants/t1/sessions/bad/session.json"
    damaged = _flip_user(path)
    m.l1.clear()
    with pytest.raises(SessionDocumentCorrupt) as info:
        m.get("t1", "bad")
    said = str(info.value)
    assert str(path) in said and "`agentrt doctor bad --repair`" in said and "\n" not in said
    assert m.last_read_trace == [("L1", "miss"), ("JSONL", "corrupt")]
    assert path.read_bytes() == damaged
    assert m.get("t1", "good").session_id == "good"
    assert m.last_read_trace == [("L1", "miss"), ("JSONL", "hit")]
    assert m.layer_status()["JSONL"] == "up"
    assert [x.session_id for x in m.jsonl.list("t1")] == ["good"]
    sql = {"SQL": "present"} if mode == "PRIMARY" else {}
    assert m.locate("t1", "bad") == {"L1": "absent", "JSONL": "corrupt", **sql}


def test_mirror_with_sql_down_refuses_a_damaged_mirror(tmp_path: Path) -> None:
    """In MIRROR while SQL is down the mirror is the answer: damaged, the read raises rather than
    rebuild something else from the event log."""
    manager(tmp_path, "MIRROR").create("t1", "agent", "u1", "bad")
    path = tmp_path / "tenants/t1/sessions/bad/session.json"
    damaged = _flip_user(path)
    (tmp_path / "down").mkdir()
    down = SqlSessionStore(sqlite_url(tmp_path / "down"))  # no tables: every call fails like an outage
    m = ChatSessionManager("MIRROR", MemorySessionStore(), None, down, JsonlSessionStore(tmp_path))
    with pytest.raises(SessionDocumentCorrupt, match="agentrt doctor bad"):
        m.get("t1", "bad")
    assert m.last_read_trace == [("L1", "miss"), ("SQL", "down"), ("JSONL", "corrupt")]
    assert path.read_bytes() == damaged


def test_mirror_answers_from_sql_over_a_damaged_mirror_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """In MIRROR (SQL is the truth) a damaged session.json leaves SQL's copy the answer, with a
    warning naming the damaged file and `agentrt doctor`; the mirror is not read as the answer."""
    import logging

    m = manager(tmp_path, "MIRROR")
    m.create("t1", "agent", "u1", "bad")
    path = tmp_path / "tenants/t1/sessions/bad/session.json"
    damaged = _flip_user(path)
    fresh = manager(tmp_path, "MIRROR")
    caplog.set_level(logging.WARNING, "agentrt.sessions")
    got = fresh.get("t1", "bad")
    assert fresh.sql is not None and got == fresh.sql.get("t1", "bad") and got.user_id == "u1"
    assert fresh.last_read_trace == [("L1", "miss"), ("SQL", "hit"), ("JSONL", "corrupt")]
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in w and "agentrt doctor bad" in w for w in said), said
    assert path.read_bytes() == damaged


def test_open_manager_builds_the_embedded_default(tmp_path: Path) -> None:
    """open_manager with no URLs runs PRIMARY on L1 + JSONL + a SQLite file it creates."""
    from agent.session.manager import open_manager

    m = open_manager("PRIMARY", tmp_path)
    m.create("t1", "agent", "u1", "s1")
    assert (tmp_path / "agentrt.db").exists() and m.l2 is None
    assert [s.session_id for s in m.list("t1")] == ["s1"]


def test_down_layer_is_skipped_until_retry_then_refilled(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A failing SQL layer is skipped until the retry time, then gets every missed save back."""
    import logging

    now = [0.0]
    sql = SqlSessionStore(sqlite_url(tmp_path))  # no tables yet: every call fails like an outage
    m = ChatSessionManager(
        "PRIMARY",
        MemorySessionStore(),
        None,
        sql,
        JsonlSessionStore(tmp_path),
        retry_interval_s=30,
        clock=lambda: now[0],
    )
    caplog.set_level(logging.WARNING, "agentrt.sessions")
    a = m.create("t1", "agent", "u1", "a")
    m.create("t1", "agent", "u1", "b")
    m.start_turn(a)
    assert m.layer_status()["SQL"] == "down (2 pending)"
    assert sum("layer SQL is down" in r.message for r in caplog.records) == 1
    sql.init()
    m.l1.clear()
    m.jsonl.delete("t1", "a")
    m.get("t1", "a")  # before the retry time SQL is skipped, so the log is the last resort
    assert m.last_read_trace == [("L1", "miss"), ("JSONL", "miss"), ("SQL", "down"), ("JSONL", "rebuilt")]
    now[0] = 31
    m.save(m.get("t1", "b"))  # PRIMARY reads stop at JSONL; the next write contacts SQL
    assert m.layer_status()["SQL"] == "up"
    got = sql.get("t1", "a")
    assert got is not None and got.loop_count == 1 and sql.get("t1", "b") is not None
    assert m.jsonl.get("t1", "a") is None  # the rebuild made while SQL was down was not cached


def test_a_context_that_is_not_json_is_refused_before_any_write(tmp_path: Path) -> None:
    """Saving a session whose context holds a non-JSON value fails clearly and changes nothing."""
    m = manager(tmp_path)
    s = m.create("t1", "agent", "u1", "s1")
    s.context["handle"] = object()
    with pytest.raises(ConfigError, match="JSON"):
        m.save(s)
    assert s.version == 1 and m.get("t1", "s1").context == {}
