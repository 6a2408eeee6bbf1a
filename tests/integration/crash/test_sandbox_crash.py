"""Crash drills for the sandbox room: a killed process, then resume and fork from the manifest."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent.tools.sandbox.room import Sandbox
from checkpointing.blobs import BlobStore

REPO = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    from agent.tools.sandbox.room import Sandbox
    from checkpointing.blobs import BlobStore

    base, mode = sys.argv[1], sys.argv[2]
    box = Sandbox(os.path.join(base, "room"), "work", blobs=BlobStore(base))
    box.write_text("report.md", "# draft 1")
    box.write_text("data/keep.csv", "a,b\\n1,2\\n")
    manifest = box.manifest()
    with open(os.path.join(base, "manifest.json"), "w") as fh:
        json.dump(manifest, fh)
        fh.flush()
        os.fsync(fh.fileno())
    box.write_text("after_checkpoint.txt", "written after the snapshot")
    box.delete("data/keep.csv")
    if mode == "mid-write":
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # die inside the next write
        box.write_text("report.md", "# draft 2, never finished")
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("mode", ["after-write", "mid-write"])
def test_kill_then_resume_restores_the_checkpoint_manifest(tmp_path: Path, mode: str) -> None:
    """After a SIGKILL, the reopened room restored from the manifest holds exactly the snapshot's files."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), mode], cwd=REPO, check=False)
    assert proc.returncode == -signal.SIGKILL
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    room = tmp_path / "room"
    assert (room / "work" / "after_checkpoint.txt").exists()
    if mode == "mid-write":  # the interrupted write left only a temp file; the target is intact
        assert any(p.name.startswith(".agentrt-tmp-") for p in (room / "work").iterdir())
        assert (room / "work" / "report.md").read_text() == "# draft 1"

    box = Sandbox(room, "work", blobs=BlobStore(tmp_path))
    box.restore(manifest)

    assert _files(room) == {"work/report.md": b"# draft 1", "work/data/keep.csv": b"a,b\n1,2\n"}
    assert box.manifest() == manifest


def test_fork_at_earlier_snapshot_after_crash(tmp_path: Path) -> None:
    """A fork from the old manifest sees the old files; the original room keeps the newer ones."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), "after-write"], cwd=REPO, check=False)
    assert proc.returncode == -signal.SIGKILL
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    original = Sandbox(tmp_path / "room", "work", blobs=BlobStore(tmp_path))
    before = _files(original.room_dir)

    fork = original.fork_room(manifest, None, tmp_path / "room_fork")

    assert fork.read_text("report.md") == "# draft 1"
    assert fork.read_text("data/keep.csv") == "a,b\n1,2\n"
    assert not fork.exists("after_checkpoint.txt")
    assert _files(original.room_dir) == before
    assert original.read_text("after_checkpoint.txt") == "written after the snapshot"


def test_temp_file_of_a_killed_write_is_swept_and_the_files_stay(tmp_path: Path) -> None:
    """The temp file a write killed before its rename left is removed; every real file keeps its bytes."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), "mid-write"], cwd=REPO, check=False)
    assert proc.returncode == -signal.SIGKILL
    room = tmp_path / "room"
    files = {k: v for k, v in _files(room).items() if not Path(k).name.startswith(".agentrt-tmp-")}
    assert len(files) < len(_files(room))

    removed = Sandbox(room, "work", blobs=BlobStore(tmp_path)).sweep_temp()

    assert removed == 1
    assert (
        _files(room)
        == files
        == {"work/report.md": b"# draft 1", "work/after_checkpoint.txt": b"written after the snapshot"}
    )
