"""ToolExecutionJournal and the resume policy of execute_with_journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent.core.errors import ModelCallFailed, ToolError
from agent.core.tool_spec import ToolContext, ToolSpec
from agent.tools.execute import execute_with_journal
from agent.tools.journal import JournalStatus, ToolExecutionJournal
from checkpointing.exceptions import StaleFencingTokenError
from checkpointing.fencing import FencingGuard
from checkpointing.record_log import RecordLog
from checkpointing.records import read_records

TENANT = "acme"
SESSION = "s1"
RUN = "run-1"
EFFECTS = ("read_only", "idempotent", "unsafe")


class EchoArgs(BaseModel):
    """Arguments of the test tool."""

    text: str


class Counter:
    """A tool body that counts its executions (the external side-effect counter)."""

    def __init__(self, result: str = "ran", error: Exception | None = None) -> None:
        self.calls = 0
        self.result = result
        self.error = error
        self.seen_journal: list[list[dict[str, Any]]] = []
        self.journal_path: Path | None = None

    def __call__(self, ctx: ToolContext, text: str) -> str:
        self.calls += 1
        if self.journal_path is not None:
            self.seen_journal.append(read_records(self.journal_path))
        if self.error is not None:
            raise self.error
        return self.result


def make_spec(effect: str, body: Counter, name: str = "echo") -> ToolSpec:
    """A ToolSpec around `body` with the given effect class."""
    return ToolSpec(name=name, description="echo", args_schema=EchoArgs, func=body, effect=effect)  # type: ignore[arg-type]


def ctx() -> ToolContext:
    """A minimal tool context."""
    return ToolContext(session_id=SESSION, tenant_id=TENANT, run_id=RUN)


def call(call_id: str = "call_1") -> dict[str, Any]:
    """A LangChain-shaped tool call."""
    return {"name": "echo", "args": {"text": "hi"}, "id": call_id}


def journal(tmp_path: Path, **kw: Any) -> ToolExecutionJournal:
    """A journal for the test session."""
    return ToolExecutionJournal(tmp_path, TENANT, SESSION, **kw)


def prepare(j: ToolExecutionJournal, state: str, effect: str) -> None:
    """Put call_1 into `state` as a crashed earlier run would have left it."""
    if state == "none":
        return
    j.record_intent(RUN, "call_1", "echo", {"text": "hi"}, effect)
    if state == "completed":
        j.record_completed(RUN, "call_1", "recorded result")
    elif state == "failed":
        j.record_failed(RUN, "call_1", "Error: tool echo failed: boom")


@pytest.mark.parametrize("effect", EFFECTS)
def test_completed_call_is_replayed_without_running(tmp_path: Path, effect: str) -> None:
    """A COMPLETED call returns the recorded result and the tool is not executed again."""
    prepare(journal(tmp_path), "completed", effect)
    body = Counter()
    out = execute_with_journal(journal(tmp_path), RUN, call(), make_spec(effect, body), ctx())
    assert out == ("recorded result", "success", True)
    assert body.calls == 0


@pytest.mark.parametrize("effect", EFFECTS)
def test_failed_call_replays_its_error(tmp_path: Path, effect: str) -> None:
    """A FAILED call gives the recorded error again without running the tool."""
    prepare(journal(tmp_path), "failed", effect)
    body = Counter()
    out = execute_with_journal(journal(tmp_path), RUN, call(), make_spec(effect, body), ctx())
    assert out == ("Error: tool echo failed: boom", "error", True)
    assert body.calls == 0


@pytest.mark.parametrize("effect", ["read_only", "idempotent"])
def test_interrupted_safe_call_is_rerun(tmp_path: Path, effect: str) -> None:
    """An INTENT without an end is re-run for read_only and idempotent tools, then COMPLETED."""
    prepare(journal(tmp_path), "intent", effect)
    body = Counter()
    j = journal(tmp_path)
    out = execute_with_journal(j, RUN, call(), make_spec(effect, body), ctx())
    assert out == ("ran", "success", False)
    assert body.calls == 1
    assert journal(tmp_path).lookup(RUN, "call_1").status is JournalStatus.COMPLETED
    assert journal(tmp_path).duplicates() == []


def test_interrupted_unsafe_call_is_never_rerun(tmp_path: Path) -> None:
    """An unsafe tool with INTENT only is reported as outcome unknown, naming tool and call id."""
    prepare(journal(tmp_path), "intent", "unsafe")
    body = Counter()
    for _ in range(2):
        text, status, replayed = execute_with_journal(journal(tmp_path), RUN, call(), make_spec("unsafe", body), ctx())
        assert status == "outcome_unknown"
        assert not replayed
        assert "echo" in text and "call_1" in text and "unknown" in text.lower()
        assert "verify" in text.lower()
    assert body.calls == 0


def test_interrupted_unsafe_call_asks_the_human_when_hitl_is_on(tmp_path: Path) -> None:
    """With HITL on, an interrupted unsafe call becomes a question instead of a re-run."""
    prepare(journal(tmp_path), "intent", "unsafe")
    body = Counter()
    text, status, _ = execute_with_journal(
        journal(tmp_path), RUN, call(), make_spec("unsafe", body), ctx(), hitl_enabled=True
    )
    assert status == "needs_human"
    assert "call_1" in text and "?" in text
    assert body.calls == 0


@pytest.mark.parametrize("effect", EFFECTS)
def test_new_call_runs_once_and_is_recorded(tmp_path: Path, effect: str) -> None:
    """A call the journal has never seen runs once; running it again replays the result."""
    body = Counter()
    spec = make_spec(effect, body)
    assert execute_with_journal(journal(tmp_path), RUN, call(), spec, ctx()) == ("ran", "success", False)
    assert execute_with_journal(journal(tmp_path), RUN, call(), spec, ctx()) == ("ran", "success", True)
    assert body.calls == 1
    kinds = [r["kind"] for r in journal(tmp_path).entries()]
    assert kinds == ["intent", "completed"]


def test_intent_is_on_disk_before_the_tool_runs(tmp_path: Path) -> None:
    """When the tool body starts, the INTENT record is already in journal.jsonl."""
    j = journal(tmp_path)
    body = Counter()
    body.journal_path = j.path
    execute_with_journal(j, RUN, call("call_9"), make_spec("unsafe", body), ctx())
    (seen,) = body.seen_journal
    assert [(r["kind"], r["tool_call_id"], r["tool_name"]) for r in seen] == [("intent", "call_9", "echo")]
    assert seen[0]["effect"] == "unsafe" and seen[0]["args_digest"].startswith("sha256:")


@pytest.mark.parametrize("error", [ToolError("file not found"), RuntimeError("kaboom")])
def test_tool_exception_becomes_failed_and_run_goes_on(tmp_path: Path, error: Exception) -> None:
    """A raising tool yields an error result and a FAILED record; a later lookup replays it."""
    body = Counter(error=error)
    text, status, replayed = execute_with_journal(journal(tmp_path), RUN, call(), make_spec("unsafe", body), ctx())
    assert status == "error" and not replayed
    assert str(error) in text and "echo" in text
    state = journal(tmp_path).lookup(RUN, "call_1")
    assert state.status is JournalStatus.FAILED and state.error == text


def test_bad_arguments_are_a_failed_call(tmp_path: Path) -> None:
    """Arguments that fail the schema are recorded as FAILED, not raised."""
    body = Counter()
    bad = {"name": "echo", "args": {"wrong": 1}, "id": "call_1"}
    _, status, _ = execute_with_journal(journal(tmp_path), RUN, bad, make_spec("unsafe", body), ctx())
    assert status == "error" and body.calls == 0
    assert journal(tmp_path).lookup(RUN, "call_1").status is JournalStatus.FAILED


def test_call_without_id_is_refused(tmp_path: Path) -> None:
    """A tool call without an id cannot be journaled and raises ModelCallFailed."""
    with pytest.raises(ModelCallFailed):
        execute_with_journal(
            journal(tmp_path),
            RUN,
            {"name": "echo", "args": {"text": "x"}},
            make_spec("unsafe", Counter()),
            ctx(),
        )


def test_large_result_goes_to_a_blob_and_reads_back(tmp_path: Path) -> None:
    """A result over the inline limit is stored as a blob reference and replayed in full."""
    big = "é" * 5000
    body = Counter(result=big)
    execute_with_journal(journal(tmp_path, inline_max_bytes=1024), RUN, call(), make_spec("unsafe", body), ctx())
    (rec,) = [r for r in journal(tmp_path).entries() if r["kind"] == "completed"]
    assert "result" not in rec and rec["result_ref"]["$blob"].startswith("sha256:")
    assert journal(tmp_path).lookup(RUN, "call_1").result == big


def test_same_call_id_in_another_run_is_a_new_call(tmp_path: Path) -> None:
    """Entries are keyed by (run_id, tool_call_id): another run with the same call id runs again."""
    body = Counter()
    spec = make_spec("unsafe", body)
    execute_with_journal(journal(tmp_path), "run-1", call(), spec, ctx())
    execute_with_journal(journal(tmp_path), "run-2", call(), spec, ctx())
    assert body.calls == 2


def test_torn_tail_is_cut_and_the_intent_before_it_survives(tmp_path: Path) -> None:
    """A half-written last record (crash mid-append) is cut off; the journal keeps working."""
    j = journal(tmp_path)
    j.record_intent(RUN, "call_1", "echo", {"text": "hi"}, "unsafe")
    with open(j.path, "ab") as fh:
        fh.write(b'{"kind":"completed","run_id":"run-1","tool_')
    fresh = journal(tmp_path)
    assert fresh.lookup(RUN, "call_1").status is JournalStatus.INTENT_ONLY
    fresh.record_failed(RUN, "call_1", "gave up")
    assert journal(tmp_path).lookup(RUN, "call_1").status is JournalStatus.FAILED
    assert j.path.with_name("journal.jsonl.broken").exists()


def test_duplicates_finds_double_completion_and_open_intents(tmp_path: Path) -> None:
    """duplicates() reports a call completed twice, an INTENT without end, and an end without INTENT."""
    j = journal(tmp_path)
    log = RecordLog(j.path)

    def rec(kind: str, call_id: str, **extra: Any) -> dict[str, Any]:
        return {"kind": kind, "run_id": RUN, "tool_call_id": call_id, "tool_name": "echo", **extra}

    log.append_many(
        [
            rec("intent", "twice"),
            rec("completed", "twice", result="a"),
            rec("completed", "twice", result="a"),
            rec("intent", "open"),
            rec("failed", "orphan", error="x"),
            rec("intent", "rerun"),
            rec("intent", "rerun"),
            rec("completed", "rerun", result="ok"),
        ]
    )
    found = {(a.tool_call_id, a.kind) for a in j.duplicates()}
    assert found == {
        ("twice", "completed_twice"),
        ("open", "intent_without_end"),
        ("orphan", "end_without_intent"),
    }
    assert j.lookup(RUN, "twice").result == "a"


def test_stale_lease_token_cannot_write_and_tool_does_not_run(tmp_path: Path) -> None:
    """After a newer lease token was seen, the old owner's journal refuses the INTENT: no execution."""
    guard = FencingGuard.for_session(tmp_path, TENANT, SESSION)
    old = journal(tmp_path, fencing=guard, token=1)
    old.record_intent(RUN, "call_0", "echo", {"text": "hi"}, "unsafe")
    FencingGuard.for_session(tmp_path, TENANT, SESSION).check_and_raise(2)
    body = Counter()
    with pytest.raises(StaleFencingTokenError):
        execute_with_journal(old, RUN, call(), make_spec("unsafe", body), ctx())
    assert body.calls == 0
    new = journal(tmp_path, fencing=FencingGuard.for_session(tmp_path, TENANT, SESSION), token=2)
    assert execute_with_journal(new, RUN, call(), make_spec("unsafe", body), ctx())[1] == "success"


def test_state_only_tool_bypasses_the_journal(tmp_path: Path) -> None:
    """A state-only tool runs every time and leaves no journal records."""
    body = Counter()
    spec = ToolSpec(name="update_todo", description="d", args_schema=EchoArgs, func=body, state_only=True)
    for _ in range(2):
        assert execute_with_journal(journal(tmp_path), RUN, call(), spec, ctx()) == ("ran", "success", False)
    assert body.calls == 2
    assert journal(tmp_path).entries() == []


def _with_saver_texts(tmp_path: Path) -> tuple[ToolExecutionJournal, Any]:
    from agent.runner.builder import _SaverTexts
    from checkpointing.saver import JsonlCheckpointSaver

    saver = JsonlCheckpointSaver(tmp_path)
    journal = ToolExecutionJournal(tmp_path, TENANT, SESSION, texts=_SaverTexts(saver, TENANT, SESSION))
    return journal, saver


def test_a_long_result_is_kept_once_in_the_checkpoint_log_and_replayed_from_it(tmp_path: Path) -> None:
    """The journal references the run log's item; the tool's message later written there is the same
    copy; a fresh journal replays the call from it without running the tool."""
    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.base import empty_checkpoint

    text = "result " + "x" * 3000
    journal, saver = _with_saver_texts(tmp_path)
    body = Counter(result=text)
    call = {"id": "c1", "name": "echo", "args": {"text": "go"}}
    assert execute_with_journal(journal, RUN, call, make_spec("unsafe", body), ctx()) == (text, "success", False)
    done = [r for r in read_records(journal.path) if r["kind"] == "completed"]
    assert "result" not in done[0] and done[0]["result_item"]["$i"]
    cfg: Any = {"configurable": {"thread_id": SESSION, "tenant_id": TENANT, "run_id": RUN, "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    stored = saver.put(cfg, cp, {"source": "loop", "step": 1}, {})
    saver.put_writes(stored, [("messages", [ToolMessage(text, tool_call_id="c1")])], "task-1")
    log = next(tmp_path.rglob("checkpoints.jsonl")).read_bytes()
    assert log.count(b"x" * 3000) == 1  # the journal's copy is the message's copy
    fresh, _ = _with_saver_texts(tmp_path)
    assert execute_with_journal(fresh, RUN, call, make_spec("unsafe", body), ctx()) == (text, "success", True)
    assert body.calls == 1


@pytest.mark.parametrize("effect", EFFECTS)
def test_a_result_whose_item_never_reached_the_disk_counts_as_unfinished(tmp_path: Path, effect: str) -> None:
    """A machine crash can keep the journal's COMPLETED record and lose the run log's item (two
    files): the call is then as if its end were lost, rerun only when it is safe to."""
    import shutil

    journal, _ = _with_saver_texts(tmp_path)
    body = Counter(result="y" * 2000)
    call = {"id": "c1", "name": "echo", "args": {"text": "go"}}
    execute_with_journal(journal, RUN, call, make_spec(effect, body), ctx())
    shutil.rmtree(next(tmp_path.rglob("runs")))
    fresh, _ = _with_saver_texts(tmp_path)
    assert fresh.lookup(RUN, "c1").status is JournalStatus.INTENT_ONLY
    body.result = "z" * 2000  # the rerun's output differs (it does not recreate the lost item)
    text, status, replayed = execute_with_journal(fresh, RUN, call, make_spec(effect, body), ctx())
    if effect == "unsafe":
        assert (status, body.calls, replayed) == ("outcome_unknown", 1, False)
    else:
        assert (text, status, body.calls) == ("z" * 2000, "success", 2)
        # The rerun's record is the one a later resume replays (the lost one is skipped for good).
        again, _ = _with_saver_texts(tmp_path)
        assert again.lookup(RUN, "c1").status is JournalStatus.COMPLETED
        assert execute_with_journal(again, RUN, call, make_spec(effect, body), ctx()) == ("z" * 2000, "success", True)
        assert body.calls == 2
