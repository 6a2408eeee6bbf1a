"""The tool execution journal over each store backend: one test body, `files` and `postgres`.

Each journal is opened over a new store object (`ToolExecutionJournal.over(store.session(...))`),
so a read after a write is a fresh process's view: nothing of the writer in memory. On `files`
the journal is the session folder's `journal.jsonl`; on `postgres` the rows of the session's
`@journal` stream, in a schema of the test's own (`tests.support.savers.SaverKit`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent.core import faults
from agent.core.tool_spec import ToolContext, ToolSpec
from agent.tools.execute import execute_with_journal
from agent.tools.journal import JournalStatus, ToolExecutionJournal
from checkpointing.exceptions import CorruptRecordError, StaleFencingTokenError
from checkpointing.layout import journal_file, session_dir
from checkpointing.store.base import JOURNAL
from tests.support.savers import DATABASE_URL, SaverKit

TENANT = "acme"
RUN = "r1"
REPO = Path(__file__).resolve().parents[4]


def open_journal(kit: SaverKit, tenant: str = TENANT, session: str = "s1", **kw: Any) -> ToolExecutionJournal:
    """The journal of (tenant, session) over a new store object of the kit's backend, its blobs the store's."""
    store = kit.store()
    return ToolExecutionJournal.over(store.session(tenant, session, "always"), store.blobs, **kw)


def raw_stream(kit: SaverKit, tenant: str = TENANT, session: str = "s1") -> bytes:
    """The journal stream's bytes: the file, or the rows concatenated in order (b"" when none)."""
    if kit.kind == "files":
        path = journal_file(session_dir(kit.base, tenant, session))
        return path.read_bytes() if path.exists() else b""
    return kit.raw(thread=session, run=JOURNAL, tenant=tenant)


def test_a_completed_call_is_read_back_by_a_new_journal(saver_kit: SaverKit, tmp_path: Path) -> None:
    """INTENT then COMPLETED through one journal: a new journal over a new store says COMPLETED
    with the result, tool and effect the first recorded; the stream's bytes are a journal.jsonl
    the files journal reads the same."""
    j = open_journal(saver_kit)
    j.record_intent(RUN, "c1", "send_mail", {"to": "bob"}, "unsafe")
    j.record_completed(RUN, "c1", "sent é")
    state = open_journal(saver_kit).lookup(RUN, "c1")
    assert state.status is JournalStatus.COMPLETED
    assert (state.result, state.tool_name, state.effect) == ("sent é", "send_mail", "unsafe")
    assert open_journal(saver_kit).completed_count(RUN) == 1
    assert [r["kind"] for r in open_journal(saver_kit).entries()] == ["intent", "completed"]

    copy = journal_file(session_dir(tmp_path / "copy", TENANT, "s1"))
    copy.parent.mkdir(parents=True)
    copy.write_bytes(raw_stream(saver_kit))
    files = ToolExecutionJournal(tmp_path / "copy", TENANT, "s1")
    assert files.entries() == open_journal(saver_kit).entries() and files.lookup(RUN, "c1") == state


def test_a_long_result_is_a_blob_of_the_store(saver_kit: SaverKit) -> None:
    """A result over inline_max_bytes is kept in the store's blobs (on postgres: nothing under the
    base folder); the stream holds only its reference, and a new journal reads it back whole."""
    j = open_journal(saver_kit, inline_max_bytes=100)
    big = "z" * 5000
    j.record_intent(RUN, "c1", "fetch", {}, "read_only")
    j.record_completed(RUN, "c1", big)
    assert b"z" * 200 not in raw_stream(saver_kit)
    assert "result_ref" in open_journal(saver_kit).entries()[-1]
    assert open_journal(saver_kit).lookup(RUN, "c1").result == big
    if saver_kit.kind == "postgres":
        assert not saver_kit.base.exists() or not any(p.is_file() for p in saver_kit.base.rglob("*"))


def test_a_stale_token_is_refused_and_nothing_is_appended(saver_kit: SaverKit) -> None:
    """A journal holding lease token 4 after token 5 was granted cannot write: the append raises
    StaleFencingTokenError and the stream is unchanged."""
    old = open_journal(saver_kit, token=4)
    old.record_intent(RUN, "c1", "send_mail", {}, "unsafe")
    saver_kit.store().session(TENANT, "s1", "always").advance_fence(5)
    before = raw_stream(saver_kit)
    with pytest.raises(StaleFencingTokenError):
        old.record_completed(RUN, "c1", "sent")
    assert raw_stream(saver_kit) == before
    assert open_journal(saver_kit).lookup(RUN, "c1").status is JournalStatus.INTENT_ONLY
    open_journal(saver_kit, token=5).record_completed(RUN, "c1", "sent")
    assert open_journal(saver_kit).lookup(RUN, "c1").status is JournalStatus.COMPLETED


def test_a_failed_call_is_read_back_with_its_error(saver_kit: SaverKit) -> None:
    """INTENT then FAILED: a new journal says FAILED with the error the model was told."""
    j = open_journal(saver_kit)
    j.record_intent(RUN, "c1", "boom", {"x": 1}, "idempotent")
    j.record_failed(RUN, "c1", "Error: tool boom failed: no")
    state = open_journal(saver_kit).lookup(RUN, "c1")
    assert (state.status, state.error) == (JournalStatus.FAILED, "Error: tool boom failed: no")


def test_anomalies_are_reported_the_same(saver_kit: SaverKit) -> None:
    """A call completed twice and one whose INTENT has no end are what doctor is shown, read by a
    new journal, whichever store holds them."""
    j = open_journal(saver_kit)
    j.record_intent(RUN, "c1", "send_mail", {}, "unsafe")
    j.record_completed(RUN, "c1", "sent")
    open_journal(saver_kit).record_completed(RUN, "c1", "sent again")
    j.record_intent(RUN, "c2", "charge", {}, "unsafe")
    found = {(a.tool_call_id, a.kind, a.detail) for a in open_journal(saver_kit).duplicates()}
    assert found == {
        ("c1", "completed_twice", "tool send_mail has 2 COMPLETED records: it ran more than once"),
        ("c2", "intent_without_end", "tool charge has an INTENT without an end: its outcome is unknown"),
    }
    assert open_journal(saver_kit).lookup(RUN, "c1").result == "sent"  # the first end is what the model saw


def test_a_damaged_line_is_refused_naming_the_stream(saver_kit: SaverKit) -> None:
    """One flipped byte in a complete line (or row) fails its checksum: reading the journal raises
    CorruptRecordError naming the journal and the line."""
    j = open_journal(saver_kit)
    j.record_intent(RUN, "c1", "send_mail", {}, "unsafe")
    j.record_completed(RUN, "c1", "sent")
    change = lambda line: line.replace(b'"sent"', b'"SENT"')  # noqa: E731
    if saver_kit.kind == "postgres":
        saver_kit.change_line(2, change, thread="s1", run=JOURNAL, tenant=TENANT)
    else:
        path = journal_file(session_dir(saver_kit.base, TENANT, "s1"))
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(lines[0] + change(lines[1]))
    with pytest.raises(CorruptRecordError) as info:
        open_journal(saver_kit).lookup(RUN, "c1")
    assert "journal.jsonl" in str(info.value) and info.value.line == 2


def test_two_tenants_are_isolated(saver_kit: SaverKit) -> None:
    """The same session and call ids under two tenants are two journals."""
    open_journal(saver_kit, tenant="acme").record_intent(RUN, "c1", "send_mail", {}, "unsafe")
    j = open_journal(saver_kit, tenant="globex")
    j.record_intent(RUN, "c1", "send_mail", {}, "unsafe")
    j.record_completed(RUN, "c1", "globex's")
    assert open_journal(saver_kit, tenant="acme").lookup(RUN, "c1").status is JournalStatus.INTENT_ONLY
    assert open_journal(saver_kit, tenant="globex").lookup(RUN, "c1").result == "globex's"
    assert open_journal(saver_kit, tenant="acme").duplicates()[0].kind == "intent_without_end"
    assert open_journal(saver_kit, tenant="globex").duplicates() == []


_CHILD = """
    import sys
    from pathlib import Path
    from pydantic import BaseModel
    from agent.core.tool_spec import ToolContext, ToolSpec
    from agent.tools.execute import execute_with_journal
    from agent.tools.journal import ToolExecutionJournal

    kind, where, counter = sys.argv[1:]
    if kind == "files":
        from checkpointing.store import FileStore
        store = FileStore(where)
    else:
        from checkpointing.store.postgres import PostgresStore
        url, schema = where.split("|")
        store = PostgresStore(url, schema=schema, max_connections=1)

    class Args(BaseModel):
        text: str

    def send(ctx, text):
        with open(counter, "a") as fh:
            fh.write("sent\\n")
        return "sent to bob"

    spec = ToolSpec(name="send", description="send", args_schema=Args, func=send, effect="unsafe")
    journal = ToolExecutionJournal.over(store.session("acme", "s1", "always"), store.blobs, token=1)
    ctx = ToolContext(session_id="s1", tenant_id="acme", run_id="r1")
    execute_with_journal(journal, "r1", {"name": "send", "args": {"text": "hi"}, "id": "c1"}, spec, ctx)
    print("not killed")
"""


class _Args(BaseModel):
    text: str


def test_a_kill_right_after_the_completed_append_never_runs_the_call_again(saver_kit: SaverKit, tmp_path: Path) -> None:
    """A process hard-killed (exit 137, as SIGKILL) right after the COMPLETED record of an unsafe
    call was appended: a new journal says COMPLETED, and running the call again replays its result
    without calling the tool."""
    counter = tmp_path / "sent.txt"
    where = str(saver_kit.base) if saver_kit.kind == "files" else f"{DATABASE_URL}|{saver_kit.schema}"
    env = {k: v for k, v in os.environ.items() if k != faults.ENV_VAR}
    env["PYTHONPATH"] = str(REPO)
    env[faults.ENV_VAR] = "after_journal_append:2"  # 1: the INTENT, 2: the COMPLETED
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD), saver_kit.kind, where, str(counter)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == faults.CRASH_EXIT_CODE, child.stderr
    assert "not killed" not in child.stdout
    assert counter.read_text() == "sent\n"

    journal = open_journal(saver_kit, token=2)
    assert journal.lookup(RUN, "c1").status is JournalStatus.COMPLETED

    def must_not_run(ctx: ToolContext, text: str) -> str:
        raise AssertionError("the call ran again")

    spec = ToolSpec(name="send", description="send", args_schema=_Args, func=must_not_run, effect="unsafe")
    ctx = ToolContext(session_id="s1", tenant_id=TENANT, run_id=RUN)
    out = execute_with_journal(journal, RUN, {"name": "send", "args": {"text": "hi"}, "id": "c1"}, spec, ctx)
    assert out == ("sent to bob", "success", True)
    assert counter.read_text() == "sent\n"
