"""Path-escape attempts against the sandbox: every one refused, nothing outside the room touched."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.core.errors import ToolError
from agent.tools.sandbox.room import Sandbox
from checkpointing.blobs import BlobStore

# Paths refused on their own text (no file-system set-up needed). The workspace is `work`, so
# escaping the room takes two `..` ("../x" is still inside the room and allowed).
LEXICAL_ESCAPES = [
    "../../outside/secret.txt",
    "../../../etc/passwd",
    "../" * 12 + "etc/passwd",
    "work/../../../outside/secret.txt",
    "./../../outside/secret.txt",
    "a/b/../../../../outside/secret.txt",
    "..//..//outside/secret.txt",
    "../.././../outside/secret.txt",
    "../../outside",
    "../../../../../../../../../../../../../../../../etc/shadow",
    "..\\..\\outside\\secret.txt",
    "..\\secret.txt",
    "a\\..\\..\\x",
    "\\\\server\\share\\x",
    "%2e%2e/%2e%2e/outside/secret.txt",
    "%2E%2E/%2E%2E/outside/secret.txt",
    "..%2f..%2foutside%2fsecret.txt",
    "..%2F..%2Fx",
    "%2e%2e%2f%2e%2e%2fx",
    "..%5c..%5cx",
    "%252e%252e/%252e%252e/x",
    "..%c0%af..%c0%afetc/passwd",
    "%c0%ae%c0%ae/%c0%ae%c0%ae/x",
    "%2e%2e",
    "x%00.txt",
    "secret.txt\x00.png",
    "\x00",
    "../\x00/x",
    "a\nb",
    "a\rb",
    "tab\there",
    "del\x7f",
    "/etc/passwd",
    "/tmp",
    "//etc/passwd",
    "/",
    "C:\\Windows\\system32",
    "C:/Windows",
    "c:x",
    "~/.bashrc",
    "~root/.ssh/id_rsa",
    "~",
    "x" * 256,
    "ä" * 128,
    ("a" * 200 + "/") * 25,
    "．．/．．/outside/secret.txt",
    "..／..／x",
    "..＼..＼x",
    "％2e％2e/x",
    "",
    "   ",
    ".agentrt-tmp-deadbeef",
]

# Paths that are fine as text but lead outside through links set up in the room (see `room`).
LINK_ESCAPES = [
    "link_dir/secret.txt",
    "link_dir/new.txt",
    "link_file",
    "link_rel",
    "sub/deep_link/secret.txt",
    "chain1",
    "link_root/etc/passwd",
    "link_dev",
    "loop/x",
]


def _tree(root: Path) -> dict[str, tuple[bytes | None, int]]:
    out: dict[str, tuple[bytes | None, int]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        out[path.relative_to(root).as_posix()] = (data, st.st_mtime_ns)
    return out


@pytest.fixture
def room(tmp_path: Path) -> Iterator[tuple[Sandbox, Callable[[], None]]]:
    """A sandbox whose room holds links pointing out, plus a checker that the outside is untouched."""
    outside = tmp_path / "outside"
    (outside / "nested").mkdir(parents=True)
    (outside / "secret.txt").write_text("top secret")
    (outside / "nested" / "secret.txt").write_text("nested secret")
    (tmp_path / "rooms" / "store").mkdir(parents=True)
    sandbox = Sandbox(tmp_path / "rooms" / "r1", "work")
    work = sandbox.room_dir / "work"
    (work / "sub").mkdir()
    os.symlink(outside, work / "link_dir")
    os.symlink(outside / "secret.txt", work / "link_file")
    os.symlink("../../../outside/secret.txt", work / "link_rel")
    os.symlink(outside / "nested", work / "sub" / "deep_link")
    os.symlink(work / "chain2", work / "chain1")
    os.symlink(outside / "secret.txt", work / "chain2")
    os.symlink("/", work / "link_root")
    os.symlink("/dev/null", work / "link_dev")
    os.symlink(work / "loop", work / "loop")
    before = _tree(tmp_path / "outside")
    siblings = sorted(p.name for p in (tmp_path / "rooms").iterdir())

    def untouched() -> None:
        assert _tree(tmp_path / "outside") == before
        assert sorted(p.name for p in (tmp_path / "rooms").iterdir()) == siblings
        assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "rooms"]

    yield sandbox, untouched
    untouched()


def test_there_are_at_least_fifty_distinct_attempts() -> None:
    """The suite tries at least 50 distinct escape paths."""
    assert len(set(LEXICAL_ESCAPES) | set(LINK_ESCAPES)) >= 50


@pytest.mark.parametrize("path", LEXICAL_ESCAPES)
def test_lexical_escape_refused_by_every_operation(room: tuple[Sandbox, Callable[[], None]], path: str) -> None:
    """A path that is unsafe as text is refused by resolve, read, write, edit, delete, list and exists."""
    sandbox, untouched = room
    operations: list[Callable[[], object]] = [
        lambda: sandbox.resolve(path),
        lambda: sandbox.read_text(path),
        lambda: sandbox.write_text(path, "pwned"),
        lambda: sandbox.edit(path, "secret", "pwned"),
        lambda: sandbox.delete(path),
        lambda: sandbox.list_dir(path),
        lambda: sandbox.exists(path),
    ]
    for op in operations:
        with pytest.raises(ToolError, match="refused"):
            op()
    untouched()


@pytest.mark.parametrize("path", LINK_ESCAPES)
def test_link_escape_refused(room: tuple[Sandbox, Callable[[], None]], path: str) -> None:
    """A path through a symlink that points outside the room is refused for read, write, edit and list."""
    sandbox, untouched = room
    for op in (
        lambda: sandbox.resolve(path),
        lambda: sandbox.read_text(path),
        lambda: sandbox.write_text(path, "pwned"),
        lambda: sandbox.edit(path, "secret", "pwned"),
        lambda: sandbox.list_dir(path),
    ):
        with pytest.raises(ToolError):
            op()
    untouched()


def test_write_through_symlinked_directory_creates_nothing_outside(
    room: tuple[Sandbox, Callable[[], None]], tmp_path: Path
) -> None:
    """Writing below a symlinked folder that points out is refused and creates no file there."""
    sandbox, untouched = room
    with pytest.raises(ToolError, match="outside the room"):
        sandbox.write_text("link_dir/nested/planted.txt", "x")
    assert not (tmp_path / "outside" / "nested" / "planted.txt").exists()
    untouched()


def test_hardlink_to_outside_file_is_not_read_or_written(
    room: tuple[Sandbox, Callable[[], None]], tmp_path: Path
) -> None:
    """A hard link in the room to an outside file cannot be read, written or edited."""
    sandbox, untouched = room
    os.link(tmp_path / "outside" / "secret.txt", sandbox.room_dir / "work" / "hard")
    for op in (
        lambda: sandbox.read_text("hard"),
        lambda: sandbox.write_text("hard", "pwned"),
        lambda: sandbox.edit("hard", "secret", "pwned"),
    ):
        with pytest.raises(ToolError, match="hard links"):
            op()
    untouched()


def test_hardlink_is_left_out_of_the_manifest(room: tuple[Sandbox, Callable[[], None]], tmp_path: Path) -> None:
    """A snapshot never copies an outside file's content through a hard link."""
    sandbox, _ = room
    os.link(tmp_path / "outside" / "secret.txt", sandbox.room_dir / "work" / "hard")
    manifest = sandbox.manifest(BlobStore(tmp_path / "rooms" / "store"))
    assert "work/hard" not in manifest
    assert not any("secret" in key for key in manifest)


def test_deleting_links_removes_only_the_links(room: tuple[Sandbox, Callable[[], None]], tmp_path: Path) -> None:
    """Deleting a symlink or hard link that points out removes the name in the room, not the target."""
    sandbox, untouched = room
    os.link(tmp_path / "outside" / "secret.txt", sandbox.room_dir / "work" / "hard")
    for name in ("link_file", "link_dir", "hard", "link_root"):
        sandbox.delete(name)
        assert not sandbox.exists(name)
    assert (tmp_path / "outside" / "secret.txt").read_text() == "top secret"
    untouched()


def test_fifo_is_refused_without_blocking(room: tuple[Sandbox, Callable[[], None]]) -> None:
    """A fifo in the room is neither read (which would block) nor written."""
    sandbox, untouched = room
    os.mkfifo(sandbox.room_dir / "work" / "pipe")
    with pytest.raises(ToolError, match="fifo"):
        sandbox.read_text("pipe")
    with pytest.raises(ToolError, match="fifo"):
        sandbox.write_text("pipe", "x")
    untouched()


def test_oversize_write_refused_and_nothing_written(room: tuple[Sandbox, Callable[[], None]]) -> None:
    """A write over max_write_bytes is refused and leaves no file behind."""
    sandbox, untouched = room
    with pytest.raises(ToolError, match="write limit"):
        sandbox.write_text("big.txt", "x" * (sandbox.max_write_bytes + 1))
    assert not sandbox.exists("big.txt")
    untouched()


def test_symlink_swapped_in_after_check_is_not_followed(
    room: tuple[Sandbox, Callable[[], None]], tmp_path: Path
) -> None:
    """A folder replaced by an outside symlink between check and use makes the write fail, not escape."""
    sandbox, untouched = room
    parts = sandbox._locate("victim/file.txt")  # the check passes while `victim` does not exist yet
    (sandbox.room_dir / "work" / "victim").symlink_to(tmp_path / "outside")
    with pytest.raises(ToolError):
        sandbox._write_bytes(parts, b"pwned", "victim/file.txt", replace_any=False)
    assert not (tmp_path / "outside" / "file.txt").exists()
    untouched()


def test_inside_paths_with_dotdot_still_work(room: tuple[Sandbox, Callable[[], None]]) -> None:
    """'..' that stays inside the room and symlinks that point inside it are allowed."""
    sandbox, untouched = room
    sandbox.write_text("../top.txt", "top")
    assert (sandbox.room_dir / "top.txt").read_text() == "top"
    os.symlink("sub", sandbox.room_dir / "work" / "inner")
    sandbox.write_text("inner/through.txt", "ok")
    assert sandbox.read_text("sub/through.txt") == "ok"
    assert sandbox.read_text("a/b/../../inner/through.txt") == "ok"
    untouched()
