"""Branches: fork at an earlier entry; the branch continues from that point, the original stays byte-identical."""

from __future__ import annotations

from pathlib import Path

from agent.runner import AgentRunner
from tests.support.runners import make_config

PLAN = {"content": '{"plan": "p", "todos": ["x"]}'}


def _write(path: str, text: str) -> dict:
    return {"tool_calls": [{"name": "write_file", "args": {"path": path, "content": text}}]}


MAIN = [
    PLAN,
    _write("a.txt", "v1"),
    {"content": "one"},
    PLAN,
    {
        "tool_calls": [
            {"name": "write_file", "args": {"path": "a.txt", "content": "v2"}},
            {"name": "write_file", "args": {"path": "b.txt", "content": "new"}},
        ]
    },
    {"content": "two"},
]
BRANCH = [*MAIN[:3], PLAN, {"tool_calls": [{"name": "read_file", "args": {"path": "a.txt"}}]}, {"content": "three"}]


def test_fork_continues_from_the_entry_and_leaves_the_original_alone(tmp_path: Path) -> None:
    """The branch sees turn 1's files and context only; the original branch's entries and files are unchanged."""
    main_runner = AgentRunner.from_config(make_config(tmp_path, MAIN))
    first = main_runner.run("turn one")
    sid = first.session_id
    second = main_runner.run("turn two", session_id=sid)
    assert second.answer == "two"
    events_path = main_runner.session_dir("default", sid) / "events.jsonl"
    before = events_path.read_bytes()
    log = main_runner.manager.event_log("default", sid)
    answer_one = next(e for e in log.entries() if e.type == "assistant_message" and e.payload["content"] == "one")

    fork = main_runner.fork(sid, answer_one.id)
    assert fork["branch_id"] != "main"

    (tmp_path / "branch").mkdir()
    branch_runner = AgentRunner.from_config(
        make_config(tmp_path / "branch", BRANCH, persistence={"base_dir": str(tmp_path / "agentrt")})
    )
    third = branch_runner.run("turn three", session_id=sid)
    assert third.status == "COMPLETED" and third.answer == "three"

    # the original branch's bytes are a prefix of the log: nothing was rewritten
    assert events_path.read_bytes().startswith(before)
    # the branch read turn 1's file, from its own room
    state = branch_runner.state(sid)
    tool_texts = [m.content for m in state["messages"] if m.type == "tool"]
    assert tool_texts[-1] == "v1"
    contents = [m.content for m in state["messages"]]
    assert "turn two" not in contents and "turn one" in contents and "turn three" in contents
    main_room = main_runner.session_dir("default", sid) / "workspace"
    assert (main_room / "a.txt").read_text() == "v2" and (main_room / "b.txt").read_text() == "new"
    branch_room = main_runner.session_dir("default", sid) / "rooms" / fork["branch_id"]
    assert (branch_room / "a.txt").read_text() == "v1" and not (branch_room / "b.txt").exists()

    # projections: each branch's page history is its own path to the root
    session = branch_runner.manager.get("default", sid)
    assert [m.content for m in branch_runner.manager.history(session)] == ["turn one", "one", "turn three", "three"]
    leaf_main = branch_runner.manager.event_log("default", sid).branch_leaf("main")
    main_path = branch_runner.manager.event_log("default", sid).projection(leaf_main)
    texts = [e.payload.get("content") for e in main_path if e.type in ("user_turn", "assistant_message")]
    assert texts == ["turn one", "one", "turn two", "two"]


def test_end_with_room_on_end_delete_removes_every_room_and_a_fork_restores_its_own(tmp_path: Path) -> None:
    """`session.room_on_end: delete`: end removes workspace/ and rooms/<b>/ (a sandbox_destroyed entry
    each); a later fork's room comes back from the fork point's manifest (a sandbox_created entry)."""
    runner = AgentRunner.from_config(make_config(tmp_path, MAIN, session={"room_on_end": "delete"}))
    sid = runner.run("turn one").session_id
    runner.run("turn two", session_id=sid)
    log = runner.manager.event_log("default", sid)
    answer_one = next(e for e in log.entries() if e.type == "assistant_message" and e.payload["content"] == "one")
    runner.end(sid)
    session_dir = runner.session_dir("default", sid)
    assert not (session_dir / "workspace").exists()
    destroyed = [e.payload for e in log.entries() if e.type == "sandbox_destroyed"]
    assert [d["room_id"] for d in destroyed] == ["workspace"]

    fork = runner.fork(sid, answer_one.id)
    room = session_dir / "rooms" / fork["branch_id"]
    assert (room / "a.txt").read_text() == "v1" and not (room / "b.txt").exists()
    created = [e for e in log.entries() if e.type == "sandbox_created"]
    assert created[-1].branch_id == fork["branch_id"] and created[-1].payload["files"] == 1
    assert runner.manager.get("default", sid).room_id == fork["branch_id"] == fork["room_id"]
    (tmp_path / "branch").mkdir()
    branch_runner = AgentRunner.from_config(
        make_config(
            tmp_path / "branch",
            BRANCH,
            persistence={"base_dir": str(tmp_path / "agentrt")},
            session={"room_on_end": "delete"},
        )
    )
    assert branch_runner.run("turn three", session_id=sid).answer == "three"
    branch_runner.end(sid)
    assert not room.exists()
    assert {e.payload["room_id"] for e in log.entries() if e.type == "sandbox_destroyed"} == {
        "workspace",
        fork["branch_id"],
    }
