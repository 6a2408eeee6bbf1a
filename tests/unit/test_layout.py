"""`checkpointing.layout`: every path of base_dir is the one sessions were written with.

The expected paths are spelled out literally here (not built from the module's constants): a
change to the layout would make existing sessions unreadable, so it must fail a test.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from agent.session.stores.sql import sqlite_file
from checkpointing import layout
from checkpointing.exceptions import InvalidIdError

BAD_IDS = ["", "../x", "a/b", "a b", "x" * 65, ".", "~abc"]


def test_tenant_and_session_paths(tmp_path: Path) -> None:
    """base_dir/tenants/<t>/sessions/<s>, the tenant's turn index, blobs and base_dir files."""
    assert layout.tenants_root(tmp_path) == tmp_path / "tenants"
    assert layout.tenant_dir(tmp_path, "t1") == tmp_path / "tenants/t1"
    assert layout.sessions_root(tmp_path, "t1") == tmp_path / "tenants/t1/sessions"
    assert layout.session_dir(tmp_path, "t1", "s-1") == tmp_path / "tenants/t1/sessions/s-1"
    assert layout.turns_dir(tmp_path, "t1") == tmp_path / "tenants/t1/turns"
    assert layout.turn_file(tmp_path, "t1", "u-1") == tmp_path / "tenants/t1/turns/u-1.json"
    assert layout.blobs_root(tmp_path) == tmp_path / "blobs/sha256"
    digest = "ab" + "0" * 62
    assert layout.blob_path(tmp_path, digest) == tmp_path / "blobs/sha256/ab" / ("0" * 62)
    assert sqlite_file(tmp_path) == tmp_path / "agentrt.db"
    assert layout.sqlite_checkpoints_file(tmp_path) == tmp_path / "checkpoints.sqlite"
    assert layout.drain_leases_root(tmp_path) == tmp_path / "drain-leases"


def test_files_of_a_session_folder(tmp_path: Path) -> None:
    """Each kind of file of a session folder, by name."""
    s = layout.session_dir(tmp_path, "default", "s1")
    assert layout.events_file(s) == s / "events.jsonl"
    assert layout.journal_file(s) == s / "journal.jsonl"
    assert layout.session_file(s) == s / "session.json"
    assert layout.pins_file(s) == s / "pins.json"
    assert layout.fence_file(s) == s / "fence.json"
    assert layout.fence_lock_file(s) == s / "fence.lock"
    assert layout.lease_files(s) == (s / "lease.lock", s / "lease.state.lock", s / "lease.json", s / "lease.token")
    assert layout.outbox_file(s) == s / "outbox.jsonl"
    assert layout.inbox_file(s) == s / "inbox.jsonl"
    assert layout.inbox_lock_file(s) == s / "inbox.lock"
    assert layout.runs_dir(s) == s / "runs"
    assert layout.run_dir(s, "r1") == s / "runs/r1"
    assert layout.checkpoints_file(s, "r1") == s / "runs/r1/checkpoints.jsonl"
    assert layout.room_path("main") == PurePosixPath("workspace")
    assert layout.room_path("b-2") == PurePosixPath("rooms/b-2")
    assert layout.room_dir(s, "main") == s / "workspace"
    assert layout.room_dir(s, "b-2") == s / "rooms/b-2"
    assert layout.room_making_dir(s / "rooms/b-2") == s / "rooms/.making-b-2"
    assert layout.SESSION_LOGS == ("events.jsonl", "journal.jsonl", "outbox.jsonl", "inbox.jsonl")


def test_files_beside_a_file(tmp_path: Path) -> None:
    """A log's persisted index and the `.broken` file a repair appends to."""
    log = tmp_path / "events.jsonl"
    assert layout.index_file(log) == tmp_path / "events.jsonl.idx"
    assert layout.broken_file(log) == tmp_path / "events.jsonl.broken"


@pytest.mark.parametrize("bad", BAD_IDS)
def test_every_id_that_becomes_a_path_is_validated(tmp_path: Path, bad: str) -> None:
    """No path function accepts an id that could leave its folder (or is not an id at all)."""
    s = tmp_path / "s"
    calls = [
        lambda: layout.tenant_dir(tmp_path, bad),
        lambda: layout.session_dir(tmp_path, "t", bad),
        lambda: layout.session_dir(tmp_path, bad, "s"),
        lambda: layout.turn_file(tmp_path, "t", bad),
        lambda: layout.run_dir(s, bad),
        lambda: layout.checkpoints_file(s, bad),
        lambda: layout.room_dir(s, bad),
        lambda: layout.blob_path(tmp_path, bad),
    ]
    for call in calls:
        with pytest.raises(InvalidIdError):
            call()
    assert not layout.is_id(bad)


def test_thread_folders_of_any_thread_id(tmp_path: Path) -> None:
    """A valid id is its own folder (the same as `session_dir`); any other thread id maps to a
    digest folder, the same one sessions were written in before the rule moved here."""
    assert layout.folder_name("s1") == "s1"
    assert layout.thread_dir(tmp_path, "t", "s1") == layout.session_dir(tmp_path, "t", "s1")
    assert layout.folder_name("a/b") == "~c14cddc033f64b9dea80ea675cf280a015e67251"
    assert layout.folder_name("ünï code") == "~cf620527eb824e2139923e380a2fa36cf81b5373"
    digest_dir = tmp_path / "tenants/t/sessions/~c14cddc033f64b9dea80ea675cf280a015e67251"
    assert layout.thread_dir(tmp_path, "t", "a/b") == digest_dir
    assert layout.is_digest_folder(layout.folder_name("a/b"))
    assert not layout.is_digest_folder("s1")


def test_listings_skip_folders_that_are_not_ids(tmp_path: Path) -> None:
    """Run and tenant listings name only folders a path function accepts."""
    s = layout.session_dir(tmp_path, "t", "s")
    for run in ("r2", "r1", "not an id"):
        (s / "runs" / run).mkdir(parents=True)
        (s / "runs" / run / "checkpoints.jsonl").write_bytes(b"")
    (s / "runs" / "empty").mkdir()
    assert layout.run_ids(s) == ["r1", "r2"]
    (tmp_path / "tenants" / "bad name").mkdir()
    assert layout.tenant_ids(tmp_path) == ["t"]
    assert layout.tenant_ids(tmp_path / "nowhere") == []
