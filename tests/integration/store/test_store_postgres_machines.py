"""Two machines on `persistence.store: postgres`, each base_dir only a local copy (no shared files):
what one machine recorded, the other sees.

- Sandbox rooms: a session whose turns run on the two machines in turn reads back every file its
  earlier turns wrote, whether the local room is missing, stale (the other machine ran the session
  since), or a crash cut a run short after a file write was journaled and before its checkpoint.
- Submitting: a turn for a session another machine ran goes to the queue of its graph version, and
  the session's owner and existence are those the store recorded.
- Retention: a machine reclaims the old sessions every machine ran, from the session table.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib

from agent.core.config import load_settings
from agent.core.errors import LeaseHeld, SessionExists, SessionNotFound
from agent.runner import AgentRunner
from agent.runner.routing import session_graph_version, turn_queue, version_queue
from agent.runner.submit import submit_turn
from agent.session import record_store
from agent.session.db_cli import db_init
from agent.session.erase import erase
from agent.session.record_store import blobs as record_blobs
from agent.session.record_store import inbox as record_inbox
from agent.session.record_store import session_streams
from agent.session.record_store import turn_index as record_turns
from agent.session.retention import GC_LOCK_FILE, collect, maybe_collect
from agent.tools.journal import ToolExecutionJournal
from graph.build import GRAPH_VERSION
from tests.integration.test_stores_support import Relay
from tests.support.celery_drill import REDIS_URL, database_url, drop_database, turn_script
from tests.support.crash import SIGKILL_CODE, run_cli
from tests.support.runners import ROOT, make_config

ONE = ("notes/one.txt", "one: written in turn 1")
TWO = ("notes/two.txt", "two: written in turn 2")
CALLS = {
    1: [("write_file", {"path": ONE[0], "content": ONE[1]})],
    2: [("read_file", {"path": ONE[0]}), ("write_file", {"path": TWO[0], "content": TWO[1]})],
    3: [("read_file", {"path": ONE[0]}), ("read_file", {"path": TWO[0]})],
}
SID = "s-rooms"


@pytest.fixture
def config(tmp_path: Path) -> Iterator[Path]:
    """A config on a fresh PostgreSQL database (`agentrt db init`), store: postgres; dropped after."""
    name = f"agentrt_rooms_{uuid.uuid4().hex[:10]}"
    cfg = make_config(
        tmp_path,
        turn_script(3, (), CALLS),
        persistence={
            "mode": "PRIMARY",
            "database_url": database_url(name),
            "store": "postgres",
            "lease": "postgres",
            "lease_ttl_s": 1.0,
        },
        tools={"builtins": ["read_file", "write_file"], "custom": []},
        workers={"broker_url": f"{REDIS_URL}/0", "result_backend": f"{REDIS_URL}/0", "queue": f"agentrt-test-{name}"},
        datasets=[],
        skills_dir=None,
    )
    db_init(load_settings(cfg))
    try:
        yield cfg
    finally:
        drop_database(name)


def _machine(config: Path, base_dir: Path) -> AgentRunner:
    """A runner on its own base_dir: one machine of the fleet."""
    return AgentRunner.from_config(config, **{"persistence.base_dir": str(base_dir)})


def _reads(runner: AgentRunner) -> list[str]:
    """What the session's read_file calls returned, in order."""
    return _reads_of(runner, SID)


def _reads_of(runner: AgentRunner, sid: str) -> list[str]:
    """What session `sid`'s read_file calls returned, in order."""
    runner.manager.l1.delete("default", sid)
    messages: list[Any] = runner.state(sid)["messages"]
    return [str(m.content) for m in messages if getattr(m, "type", "") == "tool" and m.name == "read_file"]


def _turn(runner: AgentRunner, n: int, user: str | None = None) -> None:
    """Turn n on this machine, as a worker runs it (its session cache dropped first)."""
    runner.manager.l1.delete("default", SID)
    if n == 1:
        result = runner.run("Turn 1.", new_session_id=SID, user_id=user)
    else:
        result = runner.run(f"Turn {n}.", session_id=SID, user_id=user)
    assert result.answer == f"Answer {n}.", result


def test_a_machine_whose_room_is_stale_reads_the_files_another_machine_wrote(config: Path, tmp_path: Path) -> None:
    """Turn 1 on A, turn 2 on B, turn 3 on A again: A's room still lacks B's file from turn 2."""
    a, b = _machine(config, tmp_path / "a"), _machine(config, tmp_path / "b")
    _turn(a, 1)
    _turn(b, 2)
    _turn(a, 3)
    assert _reads(a) == [ONE[1], ONE[1], TWO[1]]


def test_a_file_write_journaled_before_a_crash_is_in_the_room_another_machine_resumes(
    config: Path, tmp_path: Path
) -> None:
    """A is killed right after write_file's COMPLETED record, before the checkpoint that lists the
    file; B (an empty base_dir) resumes: the room the record carries is B's room, so turn 2 reads it."""
    env = {"AGENTRT_BASE_DIR": str(tmp_path / "a"), "AGENTRT_CRASH_AT": "after_journal_append:2"}
    env.update(PYTHONPATH=str(ROOT))
    crashed = run_cli(["run", "--config", str(config), "--new-session", SID, "Turn 1."], env)
    assert crashed.code == SIGKILL_CODE, crashed.stdout + crashed.stderr
    b = _machine(config, tmp_path / "b")
    deadline = time.monotonic() + 30
    while True:  # A's lease runs out after lease_ttl_s
        try:
            resumed = b.resume(SID)
            break
        except LeaseHeld:
            assert time.monotonic() < deadline, "A's lease never expired"
            time.sleep(0.2)
    assert resumed.answer == "Answer 1.", resumed
    # The room as write_file left it went to the store with the call's COMPLETED record: B's room
    # was made from it, and the journal holds that one call once.
    journal = ToolExecutionJournal.over(
        session_streams(b.settings, "default", SID),
        record_blobs(b.settings),  # type: ignore[arg-type]
    )
    ends = [r for r in journal.entries() if r["kind"] == "completed"]
    assert len(ends) == 1 and set(ends[0]["room_manifest"]) == {ONE[0]}, ends
    assert journal.duplicates() == []
    _turn(b, 2)
    assert _reads(b) == [ONE[1]]


def test_a_turn_submitted_on_another_machine_sees_the_session_and_its_graph_version(
    config: Path, tmp_path: Path
) -> None:
    """A ran the session (user alice); B, with an empty base_dir, routes its next turn to the graph
    version's queue, refuses to create it again, and refuses it to another user."""
    _turn(_machine(config, tmp_path / "a"), 1, user="alice")
    b = load_settings(config, overrides={"persistence.base_dir": str(tmp_path / "b")})
    assert session_graph_version(b, "default", SID) == GRAPH_VERSION
    assert turn_queue(b, "default", SID) == version_queue(b, GRAPH_VERSION)
    with pytest.raises(SessionExists, match="already exists"):
        submit_turn(b, "Again, as new.", SID, "default", "alice", new_session=True)
    with pytest.raises(SessionNotFound, match=r"no session \S+ for tenant default and user bob"):
        submit_turn(b, "Mine now.", SID, "default", "bob")
    assert record_inbox(b, "default", SID).turns() == []  # nothing was recorded for either


def test_retention_reclaims_an_old_session_that_another_machine_ran(config: Path, tmp_path: Path) -> None:
    """`session.retention_days`: B (an empty base_dir) finds A's old session on the session table
    and deletes it from the store: its event log, document and session row are gone."""
    _turn(_machine(config, tmp_path / "a"), 1)
    b = AgentRunner.from_config(config, **{"persistence.base_dir": str(tmp_path / "b"), "session.retention_days": 1})
    later = datetime.now(UTC) + timedelta(days=400)  # past the session's expiry and a day of retention
    listed = collect(b, dry_run=True, now=later)
    assert listed.sessions == [("default", SID)], listed.summary()
    gone = collect(b, now=later)
    assert gone.sessions == [("default", SID)], gone.summary()
    b.manager.l1.delete("default", SID)
    assert [s.session_id for s in b.sessions()] == []
    assert b.manager.event_log("default", SID).entries() == []
    with pytest.raises(SessionNotFound):
        b.run("Turn 2.", session_id=SID)


def test_a_redis_write_missed_on_one_machine_is_replayed_by_another(config: Path, tmp_path: Path) -> None:
    """Redis (L2) is cut while A runs turn 2, then A's base_dir is deleted: the debt is in the store's
    outbox, not lost with A. Redis back, B (an empty base_dir) never reads the stale turn-1 copy
    Redis still holds: its read replays the debt, and Redis holds the turn-2 session again."""
    sid = f"s-owed-{uuid.uuid4().hex[:8]}"
    host, port = REDIS_URL.removeprefix("redis://").split(":")
    relay = Relay(host, int(port))
    relay.restore()
    try:
        over = {"persistence.redis_url": f"redis://127.0.0.1:{relay.port}/0"}
        a = AgentRunner.from_config(config, **{"persistence.base_dir": str(tmp_path / "a"), **over})
        a.run("Turn 1.", new_session_id=sid)
        assert a.manager.l2 is not None and a.manager.l2.get("default", sid) is not None
        relay.cut()
        a.manager.l1.delete("default", sid)
        assert a.run("Turn 2.", session_id=sid).answer == "Answer 2."
        version = a.manager.jsonl.get("default", sid).version  # type: ignore[union-attr]
        assert a.manager.outbox.pending_layers("default", sid) == {"L2"}
        shutil.rmtree(tmp_path / "a")
        relay.restore()
        raw = redis_lib.Redis.from_url(REDIS_URL).get(f"agentrt:default:session:{sid}")
        assert raw is not None and f'"version":{version}'.encode() not in raw  # the copy A could not delete

        b = AgentRunner.from_config(config, **{"persistence.base_dir": str(tmp_path / "b"), **over})
        assert b.manager.outbox.due("default") == [sid]
        assert b.manager.get("default", sid).version == version, b.manager.last_read_trace
        assert b.manager.outbox.due("default") == []
        cached = b.manager.l2.get("default", sid)  # type: ignore[union-attr]
        assert cached is None or cached.version == version
    finally:
        relay.cut()


def test_erase_on_another_machine_reclaims_the_blobs_only_the_erased_user_used(config: Path, tmp_path: Path) -> None:
    """alice's session wrote notes one and two, bob's note one (the same bytes: one shared blob).
    Erasing alice from B (an empty base_dir) deletes her rows and the blob of note two; note one's
    blob stays for bob, whose session still reads it back."""
    a = _machine(config, tmp_path / "a")
    _turn(a, 1, user="alice")
    _turn(a, 2, user="alice")
    a.manager.l1.delete("default", "s-bob")
    assert a.run("Turn 1.", new_session_id="s-bob", user_id="bob").answer == "Answer 1."
    blobs = record_blobs(a.settings)
    one, two = (blobs.put(text.encode()) for _, text in (ONE, TWO))  # already there: their refs

    b = _machine(config, tmp_path / "b")
    listed = erase(b, "default", "alice", dry_run=True)
    assert listed.sessions == [("default", SID)] and listed.blobs >= 1 and blobs.exists(two)
    done = erase(b, "default", "alice", dry_run=False)
    assert done.sessions == [("default", SID)], done.summary()
    assert not blobs.exists(two) and blobs.exists(one)
    assert done.blobs >= 1 and done.blobs_kept >= 1, done.summary()
    assert not b.manager.event_log("default", SID).entries()
    b.manager.l1.delete("default", "s-bob")
    bob = b.run("Turn 2.", session_id="s-bob", user_id="bob")
    assert bob.answer == "Answer 2."
    assert _reads_of(b, "s-bob")[0] == ONE[1]

    # The whole tenant: bob's session, the blob only he used now, and every turn id it reserved.
    record_turns(b.settings, "default").reserve("turn-of-bob", "s-bob")
    everything = erase(b, "default", None, dry_run=False)
    assert everything.sessions == [("default", "s-bob")], everything.summary()
    assert not blobs.exists(one)
    assert record_store.pg_store(b.settings).reserved("default", "turn-of-bob") is None  # type: ignore[union-attr]
    assert [s.session_id for s in b.sessions()] == []


def test_one_worker_of_the_fleet_runs_retention_per_period(config: Path, tmp_path: Path) -> None:
    """Workers run retention after a task at most every `session.gc_every_minutes`, one at a time:
    on the postgres store the claim is the store's, so a machine with a fresh base_dir skips a
    period another machine already took."""
    over = {"session.retention_days": 1, "session.gc_every_minutes": 60}
    a = AgentRunner.from_config(config, **{"persistence.base_dir": str(tmp_path / "a"), **over})
    b = AgentRunner.from_config(config, **{"persistence.base_dir": str(tmp_path / "b"), **over})
    assert maybe_collect(a) is not None
    assert maybe_collect(b) is None
    assert maybe_collect(a) is None
    assert not (tmp_path / "b" / GC_LOCK_FILE).exists()
