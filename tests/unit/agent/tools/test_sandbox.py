"""Sandbox file operations, snapshots (manifest/restore), forks and lifecycle events."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent.core.errors import BackendUnavailable, ConfigError, ToolError
from agent.tools.sandbox.room import Sandbox
from checkpointing.blobs import BlobStore


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    """A blob store under tmp_path."""
    return BlobStore(tmp_path / "base")


@pytest.fixture
def events() -> list[tuple[str, dict[str, Any]]]:
    """Collected lifecycle events."""
    return []


@pytest.fixture
def sandbox(tmp_path: Path, blobs: BlobStore, events: list[tuple[str, dict[str, Any]]]) -> Sandbox:
    """A fresh room with workspace `work`."""
    return Sandbox(tmp_path / "rooms" / "r1", "work", blobs=blobs, on_event=lambda k, p: events.append((k, p)))


# ----- file operations ---------------------------------------------------------------------------


def test_write_then_read_round_trip_creates_parents(sandbox: Sandbox) -> None:
    """A written file reads back the same, with missing folders created, inside the workspace."""
    assert sandbox.write_text("reports/q1/summary.md", "héllo ✓\n") == len("héllo ✓\n".encode())
    assert sandbox.read_text("reports/q1/summary.md") == "héllo ✓\n"
    assert (sandbox.room_dir / "work" / "reports" / "q1" / "summary.md").is_file()


def test_read_window_counts_characters(sandbox: Sandbox) -> None:
    """offset and limit are characters (not bytes), and the window says whether more follows."""
    sandbox.write_text("t.txt", "ααββγγ")
    window = sandbox.read_window("t.txt", offset=2, limit=2)
    assert (window.text, window.end, window.total_chars, window.truncated) == ("ββ", 4, 6, True)
    assert sandbox.read_text("t.txt", offset=4) == "γγ"


def test_overwrite_replaces_content(sandbox: Sandbox) -> None:
    """Writing an existing file replaces its whole content."""
    sandbox.write_text("a.txt", "first version, long")
    sandbox.write_text("a.txt", "second")
    assert sandbox.read_text("a.txt") == "second"


def test_edit_replaces_exactly_one_occurrence(sandbox: Sandbox) -> None:
    """edit swaps a unique snippet and leaves the rest of the file as it was."""
    sandbox.write_text("code.py", "x = 1\ny = 2\n")
    sandbox.edit("code.py", "y = 2", "y = 3")
    assert sandbox.read_text("code.py") == "x = 1\ny = 3\n"


@pytest.mark.parametrize(
    ("old", "message"),
    [("zzz", "not found"), ("= ", "appears 2 times"), ("", "empty")],
)
def test_edit_errors_tell_what_to_do(sandbox: Sandbox, old: str, message: str) -> None:
    """A missing, ambiguous or empty `old` is refused with an actionable message; the file is unchanged."""
    sandbox.write_text("code.py", "x = 1\ny = 2\n")
    with pytest.raises(ToolError, match=message):
        sandbox.edit("code.py", old, "new")
    assert sandbox.read_text("code.py") == "x = 1\ny = 2\n"


def test_edit_refuses_binary_file(sandbox: Sandbox) -> None:
    """A file that is not UTF-8 is not edited (it would be corrupted)."""
    (sandbox.room_dir / "work" / "bin.dat").write_bytes(b"\xff\xfe\x00abc")
    with pytest.raises(ToolError, match="not UTF-8"):
        sandbox.edit("bin.dat", "abc", "def")
    assert (sandbox.room_dir / "work" / "bin.dat").read_bytes() == b"\xff\xfe\x00abc"


def test_delete_file_and_empty_dir(sandbox: Sandbox) -> None:
    """delete removes a file, then its now-empty folder."""
    sandbox.write_text("d/f.txt", "x")
    sandbox.delete("d/f.txt")
    assert not sandbox.exists("d/f.txt")
    sandbox.delete("d")
    assert not sandbox.exists("d")


def test_delete_refuses_non_empty_dir_and_workspace(sandbox: Sandbox) -> None:
    """A non-empty folder, the workspace and the room itself cannot be deleted."""
    sandbox.write_text("d/f.txt", "x")
    with pytest.raises(ToolError, match="not empty"):
        sandbox.delete("d")
    for path in (".", "..", "../work"):
        with pytest.raises(ToolError, match="cannot be deleted"):
            sandbox.delete(path)
    assert sandbox.read_text("d/f.txt") == "x"


def test_missing_and_wrong_kind_errors(sandbox: Sandbox) -> None:
    """Reading a missing file or a folder, or writing under a file, gives a clear error."""
    sandbox.write_text("f.txt", "x")
    sandbox.write_text("d/g.txt", "y")
    with pytest.raises(ToolError, match="does not exist"):
        sandbox.read_text("nope.txt")
    with pytest.raises(ToolError, match="directory"):
        sandbox.read_text("d")
    with pytest.raises(ToolError, match="directory"):
        sandbox.write_text("d", "x")
    with pytest.raises(ToolError, match="is a file"):
        sandbox.write_text("f.txt/child.txt", "x")
    with pytest.raises(ToolError, match="does not exist"):
        sandbox.delete("nope.txt")


def test_read_refuses_file_over_max_file_bytes(tmp_path: Path) -> None:
    """A file larger than max_file_bytes is not read into memory."""
    box = Sandbox(tmp_path / "room", max_file_bytes=10)
    (box.room_dir / "big.txt").write_text("x" * 11)
    with pytest.raises(ToolError, match="byte limit"):
        box.read_text("big.txt")


def test_list_dir_sorted_with_kinds(sandbox: Sandbox) -> None:
    """list_dir shows files with sizes, folders and symlinks, sorted by name."""
    sandbox.write_text("b.txt", "12345")
    sandbox.write_text("a/x.txt", "1")
    os.symlink("b.txt", sandbox.room_dir / "work" / "c")
    assert sandbox.list_dir(".") == [
        {"name": "a", "type": "dir", "size": None},
        {"name": "b.txt", "type": "file", "size": 5},
        {"name": "c", "type": "symlink", "size": None},
    ]


def test_change_dir_moves_workspace(sandbox: Sandbox) -> None:
    """Relative paths follow the workspace; change_dir cannot leave the room."""
    sandbox.change_dir("../other")
    assert sandbox.workspace == "other"
    sandbox.write_text("f.txt", "x")
    assert (sandbox.room_dir / "other" / "f.txt").is_file()
    with pytest.raises(ToolError, match="refused"):
        sandbox.change_dir("../..")


# ----- snapshots ---------------------------------------------------------------------------------


def test_manifest_restore_round_trip(sandbox: Sandbox, blobs: BlobStore) -> None:
    """After changes, deletions and additions, restore brings the room back to the snapshot exactly."""
    sandbox.write_text("a.txt", "alpha")
    sandbox.write_text("docs/b.md", "beta")
    sandbox.write_text("../top.txt", "top")
    manifest = sandbox.manifest()
    before = _tree(sandbox.room_dir)
    assert set(manifest) == {"work/a.txt", "work/docs/b.md", "top.txt"}
    assert all(ref.startswith("sha256:") and blobs.exists(ref) for ref in manifest.values())

    sandbox.write_text("a.txt", "ALPHA")  # same size, changed right after the snapshot
    sandbox.delete("docs/b.md")
    sandbox.delete("docs")
    sandbox.write_text("new/c.txt", "gamma")
    sandbox.write_text("docs", "a file where a folder was")
    sandbox.restore(manifest)

    assert _tree(sandbox.room_dir) == before
    assert sandbox.manifest() == manifest


def test_restore_removes_links_and_special_files(sandbox: Sandbox, tmp_path: Path) -> None:
    """Symlinks, fifos and empty folders not in the manifest are removed by restore."""
    sandbox.write_text("keep.txt", "k")
    manifest = sandbox.manifest()
    work = sandbox.room_dir / "work"
    os.symlink(tmp_path, work / "link")
    os.mkfifo(work / "pipe")
    (work / "empty" / "deeper").mkdir(parents=True)
    sandbox.restore(manifest)
    assert sorted(p.name for p in work.iterdir()) == ["keep.txt"]
    assert tmp_path.is_dir()


def test_snapshot_sees_same_size_rewrite(sandbox: Sandbox) -> None:
    """A same-size rewrite made right after a snapshot gets a new digest in the next one."""
    sandbox.write_text("n.txt", "1111")
    first = sandbox.manifest()
    (sandbox.room_dir / "work" / "n.txt").write_text("2222")  # behind the sandbox's back
    assert sandbox.manifest()["work/n.txt"] != first["work/n.txt"]


def test_unchanged_old_files_are_not_reread(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second snapshot of unchanged (not freshly written) files does not read them again."""
    sandbox.write_text("old.txt", "data")
    path = sandbox.room_dir / "work" / "old.txt"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    first = sandbox.manifest()
    reads: list[tuple[str, ...]] = []
    original = sandbox._read_bytes

    def counting(parts: tuple[str, ...], shown: str) -> bytes:
        reads.append(parts)
        return original(parts, shown)

    monkeypatch.setattr(sandbox, "_read_bytes", counting)
    assert sandbox.manifest() == first
    assert reads == []


def test_restore_with_corrupt_blob_changes_nothing(sandbox: Sandbox, blobs: BlobStore) -> None:
    """A blob whose bytes do not match its digest stops restore before the room is touched."""
    sandbox.write_text("a.txt", "alpha")
    manifest = sandbox.manifest()
    sandbox.write_text("a.txt", "changed")
    sandbox.write_text("extra.txt", "extra")
    before = _tree(sandbox.room_dir)
    blob = blobs.path_for(manifest["work/a.txt"])
    os.chmod(blob, 0o644)
    blob.write_bytes(b"tampered")
    with pytest.raises(BackendUnavailable, match="does not match"):
        sandbox.restore(manifest)
    assert _tree(sandbox.room_dir) == before


def test_restore_with_missing_blob_names_the_volume(sandbox: Sandbox, blobs: BlobStore) -> None:
    """A missing blob is a BackendUnavailable that says the blob volume must be mounted."""
    sandbox.write_text("a.txt", "alpha")
    manifest = sandbox.manifest()
    sandbox.delete("a.txt")
    blobs.path_for(manifest["work/a.txt"]).unlink()
    with pytest.raises(BackendUnavailable, match="mounted"):
        sandbox.restore(manifest)


@pytest.mark.parametrize(
    "manifest",
    [
        {"../escape.txt": "sha256:" + "0" * 64},
        {"/etc/passwd": "sha256:" + "0" * 64},
        {"a/./b": "sha256:" + "0" * 64},
        {"a.txt": "md5:abc"},
        {"a": "sha256:" + "0" * 64, "a/b": "sha256:" + "1" * 64},
        ["not", "a", "mapping"],
    ],
)
def test_restore_refuses_damaged_manifest(sandbox: Sandbox, manifest: Any, tmp_path: Path) -> None:
    """A manifest with unsafe paths, bad references or clashes is refused before anything is written."""
    sandbox.write_text("a.txt", "alpha")
    before = _tree(tmp_path)
    with pytest.raises(BackendUnavailable, match="damaged"):
        sandbox.restore(manifest)
    assert _tree(tmp_path) == before


def test_fork_room_leaves_original_untouched(sandbox: Sandbox, tmp_path: Path, blobs: BlobStore) -> None:
    """A fork holds the snapshot's files; changes on either side never reach the other."""
    sandbox.write_text("a.txt", "v1")
    manifest = sandbox.manifest()
    sandbox.write_text("a.txt", "v2")
    sandbox.write_text("later.txt", "only on the original branch")
    before = _tree(sandbox.room_dir)

    fork = sandbox.fork_room(manifest, blobs, tmp_path / "rooms" / "r2")
    assert fork.read_text("a.txt") == "v1"
    assert not fork.exists("later.txt")
    fork.write_text("a.txt", "fork edit")
    fork.write_text("fork_only.txt", "f")

    assert _tree(sandbox.room_dir) == before
    assert sandbox.read_text("a.txt") == "v2"
    assert fork.workspace == sandbox.workspace
    assert os.stat(fork.resolve("a.txt")).st_nlink == 1


def test_fork_room_refuses_non_empty_or_nested_target(sandbox: Sandbox, tmp_path: Path, blobs: BlobStore) -> None:
    """Forking into an existing non-empty folder or into the room itself is refused."""
    manifest = sandbox.manifest()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        sandbox.fork_room(manifest, blobs, tmp_path / "busy")
    with pytest.raises(ConfigError, match="overlaps"):
        sandbox.fork_room(manifest, blobs, sandbox.room_dir / "inner")


def test_manifest_needs_a_blob_store(tmp_path: Path) -> None:
    """Without a blob store a snapshot is a clear configuration error."""
    with pytest.raises(ConfigError, match="blob store"):
        Sandbox(tmp_path / "room").manifest()


# ----- lifecycle ---------------------------------------------------------------------------------


def test_lifecycle_events(
    sandbox: Sandbox, events: list[tuple[str, dict[str, Any]]], tmp_path: Path, blobs: BlobStore
) -> None:
    """created, snapshot, restored and destroyed are emitted with the room id, as JSON-safe payloads."""
    sandbox.write_text("a.txt", "a")
    manifest = sandbox.manifest()
    sandbox.restore(manifest)
    sandbox.destroy()
    kinds = [k for k, _ in events]
    assert kinds == ["created", "snapshot", "restored", "destroyed"]
    assert all(p["room_id"] == "r1" for _, p in events)
    assert events[1][1]["files"] == 1
    json.dumps(events)
    reopened: list[str] = []
    Sandbox(tmp_path / "rooms" / "again", blobs=blobs)
    Sandbox(tmp_path / "rooms" / "again", blobs=blobs, on_event=lambda k, p: reopened.append(k))
    assert reopened == []  # an existing room is reopened, not created


def test_destroy_removes_room_and_refuses_later_use(sandbox: Sandbox) -> None:
    """After destroy the room is gone and every operation is refused."""
    sandbox.write_text("a.txt", "a")
    room = sandbox.room_dir
    sandbox.destroy()
    assert not room.exists()
    with pytest.raises(ToolError, match="destroyed"):
        sandbox.read_text("a.txt")
    with pytest.raises(ToolError, match="destroyed"):
        sandbox.manifest()
