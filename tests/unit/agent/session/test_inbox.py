"""The session inbox: turns in submission order, statuses folded from records, unique turn ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.core.errors import ConfigError, SessionNotFound
from agent.session.inbox import Inbox, TurnStatus, new_turn_id
from agent.session.turn_index import TurnIndex
from checkpointing.exceptions import CorruptRecordError


def _submit(base: Path, sid: str, text: str, turn_id: str | None = None) -> str:
    tid = turn_id or new_turn_id()
    TurnIndex(base, "acme").reserve(tid, sid)
    Inbox(base, "acme", sid).submit(text, tid, None)
    return tid


def test_the_same_text_twice_is_two_turns_in_submission_order(tmp_path: Path) -> None:
    """Equal texts get distinct ids (never a digest of the text) and keep their order."""
    ids = [_submit(tmp_path, "s1", t) for t in ("one", "again", "again")]
    turns = Inbox(tmp_path, "acme", "s1").turns()
    assert [t.turn_id for t in turns] == ids and len(set(ids)) == 3
    assert [t.text for t in turns] == ["one", "again", "again"]
    assert all(t.status is TurnStatus.PENDING for t in turns)


def test_statuses_follow_the_records_and_the_next_open_turn_is_the_oldest(tmp_path: Path) -> None:
    """started -> RUNNING, paused -> PAUSED, decision -> PENDING with it, done -> COMPLETED/FAILED."""
    a, b = _submit(tmp_path, "s1", "a"), _submit(tmp_path, "s1", "b")
    inbox = Inbox(tmp_path, "acme", "s1")
    inbox.mark_started(a, "", "w1")
    assert inbox.turn(a).status is TurnStatus.RUNNING and inbox.turn(a).baseline_run_id == ""
    inbox.mark_started(a, "r-later", "w2")  # a resume keeps the first baseline
    assert inbox.turn(a).baseline_run_id == "" and inbox.turn(a).attempts == 2
    inbox.mark_paused(a, {"status": "PAUSED", "run_id": "r-1"}, "w2")
    assert inbox.turn(a).status is TurnStatus.PAUSED and inbox.next_open() == inbox.turn(a)
    inbox.add_decision(a, {"approved": True})
    assert inbox.turn(a).status is TurnStatus.PENDING and inbox.turn(a).decision == {"approved": True}
    inbox.mark_done(a, {"status": "COMPLETED", "run_id": "r-1", "answer": "ok"}, "w2")
    assert inbox.turn(a).finished and inbox.turn(a).to_json()["answer"] == "ok"
    assert inbox.next_open() == inbox.turn(b)
    inbox.mark_done(b, {"status": "FAILED", "error": "boom"}, "w2")
    assert inbox.turn(b).status is TurnStatus.FAILED and inbox.next_open() is None


def test_a_turn_id_is_used_once_per_tenant_and_found_again(tmp_path: Path) -> None:
    """A reused id is refused with what to do; the index maps an id back to its session."""
    _submit(tmp_path, "s1", "a", "t-1")
    with pytest.raises(ConfigError, match="was used before"):
        _submit(tmp_path, "s2", "b", "t-1")
    assert TurnIndex(tmp_path, "acme").session_of("t-1") == "s1"
    with pytest.raises(SessionNotFound, match="no turn t-2"):
        TurnIndex(tmp_path, "acme").session_of("t-2")
    assert TurnIndex(tmp_path, "other").dir != TurnIndex(tmp_path, "acme").dir


@pytest.mark.parametrize("bad", ["../x", "a/b", "", "x" * 65])
def test_ids_that_become_paths_are_validated(tmp_path: Path, bad: str) -> None:
    """Session, tenant and turn ids are checked before they reach a path (an empty one says so)."""
    said = "must not be empty" if bad == "" else "invalid"
    with pytest.raises(ConfigError, match=said):
        Inbox(tmp_path, "acme", bad)
    with pytest.raises(ConfigError, match=said):
        TurnIndex(tmp_path, "acme").reserve(bad, "s1")


def test_an_empty_text_is_refused(tmp_path: Path) -> None:
    """A blank turn is a one-line error, and nothing is recorded."""
    with pytest.raises(ConfigError, match="empty input"):
        Inbox(tmp_path, "acme", "s1").submit("  ", "t-1", None)
    assert Inbox(tmp_path, "acme", "s1").turns() == []


def test_a_torn_last_line_is_skipped_by_readers_and_cut_by_the_next_append(tmp_path: Path) -> None:
    """A writer killed mid-append leaves a partial line: reads ignore it (never cut), the next append cuts it."""
    a = _submit(tmp_path, "s1", "a")
    inbox = Inbox(tmp_path, "acme", "s1")
    with open(inbox.path, "ab") as fh:
        fh.write(b'{"kind":"started","turn_id":"')
    before = inbox.path.read_bytes()
    assert [t.turn_id for t in inbox.turns()] == [a]
    assert inbox.path.read_bytes() == before  # a reader changed nothing
    Inbox(tmp_path, "acme", "s1").mark_started(a, "", "w1")
    assert Inbox(tmp_path, "acme", "s1").turn(a).status is TurnStatus.RUNNING


def test_a_damaged_complete_record_is_reported_with_file_and_line(tmp_path: Path) -> None:
    """Corruption before the last line is an error naming the file and line; nothing is changed."""
    _submit(tmp_path, "s1", "a")
    inbox = Inbox(tmp_path, "acme", "s1")
    data = inbox.path.read_bytes().replace(b'"a"', b'"b"')
    inbox.path.write_bytes(data)
    with pytest.raises(CorruptRecordError, match=r"inbox\.jsonl:1"):
        inbox.turns()
    assert inbox.path.read_bytes() == data


def test_a_flipped_final_newline_never_loses_the_turn(tmp_path: Path) -> None:
    """A complete last record whose newline took a bit flip still verifies: the turn is read as it
    was (never dropped as a torn tail), the read leaves the file as it was, and the next append
    puts the newline back first."""
    _submit(tmp_path, "s1", "a")
    _submit(tmp_path, "s1", "b")
    inbox = Inbox(tmp_path, "acme", "s1")
    data = bytearray(inbox.path.read_bytes())
    data[-1] ^= 0x01  # b"\n" -> b"\x0b"
    inbox.path.write_bytes(bytes(data))
    assert [t.text for t in inbox.turns()] == ["a", "b"]
    assert inbox.path.read_bytes() == bytes(data)
    _submit(tmp_path, "s1", "c")
    assert [t.text for t in Inbox(tmp_path, "acme", "s1").turns()] == ["a", "b", "c"]


def test_a_flipped_bit_in_a_turn_file_never_points_at_another_session(tmp_path: Path) -> None:
    """`s1` -> `s0` in `turns/<id>.json` is never a turn of session s0: the file is rebuilt from
    the inbox that holds the turn (its damaged bytes kept in `<file>.broken`)."""
    _submit(tmp_path, "s1", "a", "t-1")
    _submit(tmp_path, "s0", "b", "t-0")
    index = TurnIndex(tmp_path, "acme")
    path = index.dir / "t-1.json"
    data = path.read_bytes()
    damaged = data.replace(b'"s1"', b'"s0"')  # one bit: "1" is 0x31, "0" is 0x30
    assert damaged != data
    path.write_bytes(damaged)
    assert index.session_of("t-1") == "s1"
    assert path.read_bytes() == data
    assert (index.dir / "t-1.json.broken").read_bytes() == damaged
    assert index.session_of("t-1") == "s1"


def test_a_damaged_turn_file_no_inbox_holds_is_an_unknown_turn(tmp_path: Path) -> None:
    """A damaged turn file whose turn no session's inbox holds was never submitted: not found,
    and the file is left as it is (the id stays used)."""
    _submit(tmp_path, "s1", "a", "t-1")
    index = TurnIndex(tmp_path, "acme")
    index.reserve("t-9", "s1")  # reserved, never submitted
    path = index.dir / "t-9.json"
    damaged = path.read_bytes()[:-2]
    path.write_bytes(damaged)
    with pytest.raises(SessionNotFound, match="no turn t-9"):
        index.session_of("t-9")
    assert path.read_bytes() == damaged
    with pytest.raises(ConfigError, match="used before"):
        index.reserve("t-9", "s1")


def test_a_turn_file_of_the_previous_format_is_still_read(tmp_path: Path) -> None:
    """A plain-JSON turn file left by the previous release maps its turn as before."""
    index = TurnIndex(tmp_path, "acme")
    index.dir.mkdir(parents=True)
    (index.dir / "t-old.json").write_text(json.dumps({"session_id": "s9", "turn_id": "t-old"}))
    assert index.session_of("t-old") == "s9"


def test_a_turn_file_a_crash_left_empty_is_an_unknown_turn(tmp_path: Path) -> None:
    """A reservation cut short by a crash (empty or zeroed file) was never submitted: not found."""
    index = TurnIndex(tmp_path, "acme")
    index.dir.mkdir(parents=True)
    for leftover in (b"", b"\x00" * 40):
        (index.dir / "t-0.json").write_bytes(leftover)
        with pytest.raises(SessionNotFound, match="no turn t-0"):
            index.session_of("t-0")


def test_live_and_continuation_turns_keep_their_flags_and_decision(tmp_path: Path) -> None:
    """`live` (from the submission or a later decision) and `resume` turns with their decision fold back."""
    inbox = Inbox(tmp_path, "acme", "s1")
    plain = _submit(tmp_path, "s1", "plain")
    assert inbox.turn(plain).live is False and inbox.turn(plain).resume is False
    inbox.mark_paused(plain, {"status": "PAUSED"}, "w1")
    inbox.add_decision(plain, {"approved": True}, live=True)  # answered through `agentrt serve`
    assert inbox.turn(plain).live is True and inbox.turn(plain).decision == {"approved": True}
    TurnIndex(tmp_path, "acme").reserve("c1", "s1")
    inbox.submit_resume("c1", "alice", {"approved": False, "reason": "no"}, live=True)
    cont = inbox.turn("c1")
    assert (cont.resume, cont.live, cont.text, cont.user_id) == (True, True, "", "alice")
    assert cont.decision == {"approved": False, "reason": "no"}
    inbox.mark_paused("c1", {"status": "PAUSED"}, "w1")  # paused again: the decision was used
    assert inbox.turn("c1").decision is None and inbox.turn("c1").resume is True


def test_a_sealed_inbox_refuses_submitters_until_unsealed_or_lapsed(tmp_path: Path) -> None:
    """A session being made again seals its inbox first: its records are handed over whole, a turn
    submitted meanwhile is refused with "submit again" (never appended to an inbox about to go),
    and an unseal (renewal not done) or a lapsed seal (its writer died) lets submitters in again."""
    a, b = _submit(tmp_path, "s1", "a"), _submit(tmp_path, "s1", "b")
    inbox = Inbox(tmp_path, "acme", "s1")
    handed = inbox.seal(60.0)
    assert [r["turn_id"] for r in handed] == [a, b] and all(r["kind"] == "submitted" for r in handed)
    with pytest.raises(SessionNotFound, match="submit again"):
        _submit(tmp_path, "s1", "c")
    assert [t.turn_id for t in inbox.turns()] == [a, b]  # the refused turn left nothing behind
    inbox.unseal()
    c = _submit(tmp_path, "s1", "c")
    assert [t.turn_id for t in inbox.turns()] == [a, b, c]
    assert [r["turn_id"] for r in inbox.seal(0.0)] == [a, b, c]  # seals are never handed over
    d = _submit(tmp_path, "s1", "d")  # a seal of 0 s has lapsed at once
    assert [t.turn_id for t in inbox.turns()] == [a, b, c, d]


def test_a_turn_for_a_session_removed_since_its_check_is_refused_not_queued(tmp_path: Path) -> None:
    """The submitter checked the session, then it was removed (to be made again, its old turns
    carried over first): an empty inbox is not taken as the session's, so the turn never runs
    ahead of the carried ones; a session that is there takes its first turn as before."""
    inbox = Inbox(tmp_path, "acme", "s1")
    with pytest.raises(SessionNotFound, match="no session s1"):
        inbox.submit("late", new_turn_id(), None, exists=lambda: False)
    assert inbox.turns() == []
    tid = new_turn_id()
    inbox.submit("first", tid, None, exists=lambda: True)
    assert [t.turn_id for t in inbox.turns()] == [tid]
