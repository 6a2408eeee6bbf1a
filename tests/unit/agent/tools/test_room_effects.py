"""Unsafe room tools after a crash: the room tells whether the interrupted call took effect.

Each case leaves what a process killed mid-call leaves (the INTENT with its `room` effect, and the
write done or not), then runs the call again through `execute_with_journal`: the room must end as
if the call had run exactly once, and only a room changed by something else is "outcome unknown".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.core.tool_spec import ToolContext, ToolSpec
from agent.tools.execute import execute_with_journal
from agent.tools.journal import JournalStatus, ToolExecutionJournal
from agent.tools.registry import builtin_tools
from agent.tools.sandbox.room import Sandbox
from checkpointing.blobs import BlobStore
from tests.support.crash import room_files

RUN = "run-1"
# tool name -> (arguments, what the room holds before the call). The edit's new text contains the
# old one: run twice, it would grow twice.
CASES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "edit_file": ({"path": "notes.txt", "old": "a", "new": "aa"}, {"notes.txt": "a b"}),
    "delete_file": ({"path": "notes.txt"}, {"notes.txt": "a b"}),
    "publish_report": ({"path": "report.md", "channel": "team"}, {"report.md": "# report\n"}),
}


def _prepared(tmp_path: Path, tool: str, name: str) -> tuple[Sandbox, ToolContext, ToolSpec, dict[str, Any]]:
    args, files = CASES[tool]
    box = Sandbox(tmp_path / name, blobs=BlobStore(tmp_path / "blobs"))
    for path, text in files.items():
        box.write_text(path, text)
    spec = builtin_tools()[tool]
    return box, ToolContext(session_id="s1", tenant_id="default", run_id=RUN, sandbox=box), spec, args


def _uncrashed(tmp_path: Path, tool: str) -> dict[str, Any]:
    box, ctx, spec, args = _prepared(tmp_path, tool, "reference")
    spec.invoke(ctx, args)
    return room_files(box.room_dir)


def _crashed(
    tmp_path: Path, tool: str, meanwhile: Callable[[Sandbox, ToolContext, ToolSpec, dict[str, Any]], None]
) -> tuple[Sandbox, ToolContext, ToolSpec, dict[str, Any], ToolExecutionJournal]:
    """The INTENT recorded as the runtime records it, then `meanwhile` (what happened before the kill)."""
    box, ctx, spec, args = _prepared(tmp_path, tool, "room")
    journal = ToolExecutionJournal(tmp_path, "default", "s1")
    journal.record_intent(RUN, "call_1", tool, args, spec.effect, spec.expected_effect(ctx, args))
    meanwhile(box, ctx, spec, args)
    return box, ctx, spec, args, ToolExecutionJournal(tmp_path, "default", "s1")


@pytest.mark.parametrize("tool", list(CASES))
def test_call_killed_before_its_write_runs_once_on_resume(tmp_path: Path, tool: str) -> None:
    """INTENT recorded, nothing written: the resume runs the call, and the room is the uncrashed one."""
    box, ctx, spec, args, journal = _crashed(tmp_path, tool, lambda *_: None)

    text, status, replayed = execute_with_journal(journal, RUN, {"name": tool, "args": args, "id": "call_1"}, spec, ctx)

    assert (status, replayed) == ("success", False)
    assert room_files(box.room_dir) == _uncrashed(tmp_path, tool)
    assert journal.lookup(RUN, "call_1").result == text


@pytest.mark.parametrize("tool", list(CASES))
def test_call_killed_after_its_write_is_completed_not_run_again(tmp_path: Path, tool: str) -> None:
    """The write happened, its COMPLETED record did not: the resume records it with the call's result."""
    results: list[str] = []
    box, ctx, spec, args, journal = _crashed(tmp_path, tool, lambda b, c, s, a: results.append(s.invoke(c, a)))

    out = execute_with_journal(journal, RUN, {"name": tool, "args": args, "id": "call_1"}, spec, ctx)

    assert out == (results[0], "success", True)
    assert room_files(box.room_dir) == _uncrashed(tmp_path, tool)
    assert journal.lookup(RUN, "call_1").status is JournalStatus.COMPLETED
    assert journal.duplicates() == []


@pytest.mark.parametrize("tool", list(CASES))
def test_room_changed_otherwise_stays_outcome_unknown(tmp_path: Path, tool: str) -> None:
    """A file that is neither as before nor as after the call: the journal cannot tell, and says so."""

    def tamper(box: Sandbox, ctx: ToolContext, spec: ToolSpec, args: dict[str, Any]) -> None:
        effect = spec.expected_effect(ctx, args)
        assert effect is not None
        box.write_text(effect.path, "changed by someone else")

    box, ctx, spec, args, journal = _crashed(tmp_path, tool, tamper)
    before = room_files(box.room_dir)

    text, status, replayed = execute_with_journal(journal, RUN, {"name": tool, "args": args, "id": "call_1"}, spec, ctx)

    assert (status, replayed) == ("outcome_unknown", False)
    assert "NOT run again" in text
    assert room_files(box.room_dir) == before


def test_intent_without_room_effect_stays_outcome_unknown(tmp_path: Path) -> None:
    """An INTENT written before room effects were recorded: never guessed, never re-run."""
    box, ctx, spec, args = _prepared(tmp_path, "edit_file", "room")
    journal = ToolExecutionJournal(tmp_path, "default", "s1")
    journal.record_intent(RUN, "call_1", "edit_file", args, "unsafe")

    _, status, _ = execute_with_journal(journal, RUN, {"name": "edit_file", "args": args, "id": "call_1"}, spec, ctx)

    assert status == "outcome_unknown"
    assert box.read_text("notes.txt") == "a b"


def test_call_that_fails_records_no_room_effect(tmp_path: Path) -> None:
    """A call whose effect cannot be worked out (the file is missing) fails as before: FAILED, room untouched."""
    box, ctx, spec, _ = _prepared(tmp_path, "edit_file", "room")
    args = {"path": "missing.txt", "old": "a", "new": "b"}
    journal = ToolExecutionJournal(tmp_path, "default", "s1")

    text, status, _ = execute_with_journal(journal, RUN, {"name": "edit_file", "args": args, "id": "c9"}, spec, ctx)

    assert status == "error" and "does not exist" in text
    assert journal.lookup(RUN, "c9").status is JournalStatus.FAILED
    assert journal.entries()[0].get("room") is None
    assert set(room_files(box.room_dir)) == {"notes.txt"}


@pytest.mark.parametrize("tool", list(CASES))
def test_completed_call_records_the_room_it_left(tmp_path: Path, tool: str) -> None:
    """The COMPLETED record of a call that may change the room carries the room's manifest, whose
    files are in the blob store: a room rebuilt from it alone is the room the call left."""
    box, ctx, spec, args = _prepared(tmp_path, tool, "room")
    journal = ToolExecutionJournal(tmp_path, "default", "s1", blobs=box.blobs)

    execute_with_journal(journal, RUN, {"name": tool, "args": args, "id": "call_1"}, spec, ctx)

    manifest = journal.lookup(RUN, "call_1").room_manifest
    assert manifest is not None
    rebuilt = Sandbox(tmp_path / "elsewhere", blobs=BlobStore(tmp_path / "blobs"))
    rebuilt.restore(manifest)
    assert room_files(rebuilt.room_dir) == room_files(box.room_dir) == _uncrashed(tmp_path, tool)


def test_read_only_call_records_no_room(tmp_path: Path) -> None:
    """A read-only call cannot change the room: its record stays small (no manifest)."""
    box, ctx, _, _ = _prepared(tmp_path, "edit_file", "room")
    journal = ToolExecutionJournal(tmp_path, "default", "s1", blobs=box.blobs)
    spec = builtin_tools()["read_file"]

    execute_with_journal(journal, RUN, {"name": "read_file", "args": {"path": "notes.txt"}, "id": "r1"}, spec, ctx)

    assert journal.lookup(RUN, "r1").room_manifest is None
    assert "room_manifest" not in journal.entries()[-1]


@pytest.mark.parametrize("tool", list(CASES))
def test_completed_call_replayed_into_an_older_room_restores_it_without_running(tmp_path: Path, tool: str) -> None:
    """A machine that never saw the call (its room made from an older checkpoint): the replay makes
    the room what the call left, from the COMPLETED record, and never runs the tool again."""
    box, ctx, spec, args = _prepared(tmp_path, tool, "room")
    before = box.manifest()
    journal = ToolExecutionJournal(tmp_path, "default", "s1", blobs=box.blobs)
    text, _, _ = execute_with_journal(journal, RUN, {"name": tool, "args": args, "id": "call_1"}, spec, ctx)
    other = Sandbox(tmp_path / "other-machine", blobs=BlobStore(tmp_path / "blobs"))
    other.restore(before)
    other.refilled = True
    calls: list[Any] = []
    never = ToolSpec(
        name=spec.name,
        description=spec.description,
        args_schema=spec.args_schema,
        func=lambda *a, **k: calls.append(a) or "ran again",
        effect=spec.effect,
        room_effect=spec.room_effect,
    )
    ctx2 = ToolContext(session_id="s1", tenant_id="default", run_id=RUN, sandbox=other)

    out = execute_with_journal(journal, RUN, {"name": tool, "args": args, "id": "call_1"}, never, ctx2)

    assert out == (text, "success", True)
    assert calls == []
    assert room_files(other.room_dir) == _uncrashed(tmp_path, tool)


def test_a_large_room_manifest_is_kept_as_a_blob_and_read_back(tmp_path: Path) -> None:
    """A room of many files: the record holds a reference, the lookup the whole manifest."""
    box, ctx, spec, args = _prepared(tmp_path, "edit_file", "room")
    for i in range(40):
        box.write_text(f"many/file-{i:02d}.txt", f"file {i}")
    journal = ToolExecutionJournal(tmp_path, "default", "s1", blobs=box.blobs, inline_max_bytes=256)

    execute_with_journal(journal, RUN, {"name": "edit_file", "args": args, "id": "call_1"}, spec, ctx)

    record = journal.entries()[-1]
    assert "room_manifest" not in record and "room_manifest_ref" in record
    manifest = journal.lookup(RUN, "call_1").room_manifest
    assert manifest is not None and len(manifest) == 41 and manifest == box.manifest()
