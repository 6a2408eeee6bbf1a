"""Confinement primitives of the sandbox: path validation and descriptor-relative file access.

`path_parts` is pure: it refuses what can never be a safe room path and resolves `..` lexically.

Closing the check-then-use gap: after the checks, every operation walks from the room's directory
descriptor one component at a time with `O_NOFOLLOW | O_DIRECTORY` (`open_dir`) and acts with
`dir_fd`, so a symlink swapped in after the check makes the call fail instead of escaping. Writes
(`replace_file`) go to a temp file opened `O_CREAT | O_EXCL | O_NOFOLLOW` and are renamed over the
target (atomic, never through a link). `check_manifest` validates a manifest read back from a
checkpoint. `fingerprint` and `sweep_temp` serve crash recovery.
`agent.tools.sandbox.room` explains the rules as a whole.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agent.core.errors import BackendUnavailable, ToolError
from agent.core.faults import crash_point

MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
TMP_PREFIX = ".agentrt-tmp-"
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | NOFOLLOW | CLOEXEC
_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
# NUL, '%', '.', '/', '\\' and the overlong-UTF-8 lead bytes once used to smuggle '/' past checks.
_BAD_PCT = {0x00, 0x25, 0x2E, 0x2F, 0x5C, 0xC0, 0xC1}
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
_REF_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


def refuse(path: str, why: str) -> ToolError:
    """The error for a refused path (long paths shortened so the message stays readable)."""
    shown = path if len(path) <= 80 else path[:77] + "..."
    return ToolError(f"path {shown!r} refused: {why}")


def _check_text(path: str) -> None:
    if "\x00" in path:
        raise refuse(path, "contains a NUL byte")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise refuse(path, "contains control characters")
    if "\\" in path:
        raise refuse(path, "contains a backslash; use '/' between folders")
    if any(int(m.group(1), 16) in _BAD_PCT for m in _PCT_RE.finditer(path)):
        raise refuse(path, "contains a percent-encoded dot, slash or percent; write the path plainly")
    if any(ord(c) > 127 and any(x in unicodedata.normalize("NFKC", c) for x in "/\\.%") for c in path):
        raise refuse(path, "contains a Unicode lookalike of '/', '.' or '\\'; use plain ASCII separators")
    if path.startswith("/") or _DRIVE_RE.match(path):
        raise refuse(path, "absolute paths are not allowed; paths are relative to the workspace")
    if path.startswith("~"):
        raise refuse(path, "'~' is not expanded; paths are relative to the workspace")
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise refuse(path, "is not valid Unicode text") from None
    if size > MAX_PATH_BYTES:
        raise refuse(path, f"longer than {MAX_PATH_BYTES} bytes")


def path_parts(path: object, base: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Validate a path the agent named; return its room-relative parts (joined onto `base`)."""
    if not isinstance(path, str):
        raise ToolError(f"path must be a string, got {type(path).__name__}")
    if not path.strip():
        raise refuse(path, "empty path; name a file relative to the workspace ('.' is the workspace)")
    _check_text(path)
    stack = list(base)
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                raise refuse(path, "'..' would leave the room")
            stack.pop()
            continue
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise refuse(path, f"a name is longer than {MAX_NAME_BYTES} bytes")
        if part.startswith(TMP_PREFIX):
            raise refuse(path, f"names starting with {TMP_PREFIX!r} are reserved")
        stack.append(part)
    return tuple(stack)


def inside(root: str, path: str) -> bool:
    """Whether absolute `path` is `root` or below it (component-wise, not a string prefix)."""
    return os.path.commonpath([root, path]) == root


@contextmanager
def open_dir(root: str, parts: tuple[str, ...], create: bool = False) -> Iterator[int]:
    """A descriptor of directory root/parts, reached without following any symlink."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for name in parts:
            try:
                nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


@contextmanager
def os_errors(shown: str) -> Iterator[None]:
    """Turn OS errors into ToolErrors the model can act on."""
    try:
        yield
    except FileNotFoundError:
        raise ToolError(f"{shown!r} does not exist; use list_files to see what is there") from None
    except NotADirectoryError:
        raise ToolError(f"{shown!r}: a folder in the path is a file or a symlink; check the path") from None
    except IsADirectoryError:
        raise ToolError(f"{shown!r} is a directory; name a file, or use list_files") from None
    except OSError as err:
        raise ToolError(f"{shown!r}: {err.strerror or err}; the file system refused it") from None


def check_regular(st: os.stat_result, shown: str) -> None:
    """Refuse anything but a singly linked regular file (see `agent.tools.sandbox.room` for why)."""
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown!r} is a directory; name a file, or use list_files")
    if stat.S_ISLNK(st.st_mode):
        raise refuse(shown, "it is a symlink that changed during the operation")
    if not stat.S_ISREG(st.st_mode):
        raise refuse(shown, "it is a device, fifo or socket; only regular files can be read or written")
    if st.st_nlink > 1:
        raise refuse(shown, "the file has other hard links (maybe outside the room); delete it, write a new one")


def scan(root: str) -> list[tuple[str, os.stat_result]]:
    """Every entry under `root` (lstat, no link followed), children before their folder, sorted.

    Includes temp files a crash left behind, so that restore removes them.
    """

    def walk(dfd: int, prefix: str) -> Iterator[tuple[str, os.stat_result]]:
        with os.scandir(dfd) as it:
            items = sorted((e.name, e.stat(follow_symlinks=False)) for e in it)
        for name, st in items:
            if stat.S_ISDIR(st.st_mode):
                sub = os.open(name, DIR_FLAGS, dir_fd=dfd)
                try:
                    yield from walk(sub, f"{prefix}{name}/")
                finally:
                    os.close(sub)
            yield f"{prefix}{name}", st

    with open_dir(root, ()) as fd:
        return list(walk(fd, ""))


def entry_kind(mode: int) -> str:
    """'dir', 'file', 'symlink' or 'other' for an lstat mode."""
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "symlink" if stat.S_ISLNK(mode) else "other"


def replace_file(dfd: int, name: str, data: bytes) -> None:
    """Atomically make `name` in directory `dfd` hold `data`: temp file, fsync, rename over it."""
    tmp = TMP_PREFIX + secrets.token_hex(8)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC, 0o644, dir_fd=dfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dfd)
        raise
    os.close(fd)
    crash_point("mid_room_write")
    # rename replaces the name itself: a symlink or hard link at `name` is never written through.
    os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)


def check_manifest(manifest: object) -> dict[str, str]:
    """Validate a manifest read back from a checkpoint: canonical safe paths, sha256 refs, no clashes."""
    if not isinstance(manifest, dict):
        raise BackendUnavailable("sandbox manifest is not a mapping; the checkpoint is damaged")
    ancestors: set[str] = set()
    for rel, ref in manifest.items():
        try:
            parts = path_parts(rel)
        except ToolError as err:
            raise BackendUnavailable(f"sandbox manifest has a bad path: {err}; the checkpoint is damaged") from None
        if "/".join(parts) != rel or not isinstance(ref, str) or not _REF_RE.match(ref):
            raise BackendUnavailable(f"sandbox manifest entry {rel!r}: {ref!r} is invalid; the checkpoint is damaged")
        ancestors.update("/".join(parts[:i]) for i in range(1, len(parts)))
    if clash := ancestors & set(manifest):
        raise BackendUnavailable(f"sandbox manifest uses {sorted(clash)[0]!r} as file and folder; it is damaged")
    return dict(manifest)


def encode_text(content: str) -> bytes:
    """The bytes a text write stores for `content`."""
    return content.encode("utf-8", errors="surrogatepass")


def content_digest(data: bytes | str) -> str:
    """The `fingerprint` of a regular file holding `data` (text encoded as a write stores it)."""
    raw = encode_text(data) if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def fingerprint(root: str, parts: tuple[str, ...], read: Callable[[tuple[str, ...]], bytes]) -> str | None:
    """What root/parts holds: None (nothing), `content_digest` of a regular file (read by `read`),
    `dir`, `symlink:<target>` or `other` (special or hard-linked file, or a path through a symlink)."""
    if not parts:
        return "dir"
    try:
        with open_dir(root, parts[:-1]) as dfd:
            st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                return "symlink:" + os.readlink(parts[-1], dir_fd=dfd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return "other"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        return "other"
    return content_digest(read(parts))


def sweep_temp(root: str, entries: list[tuple[str, os.stat_result]]) -> int:
    """Unlink the temp files among `entries` (a `scan` of root); returns how many."""
    removed = 0
    for rel, st in entries:
        parts = tuple(rel.split("/"))
        if parts[-1].startswith(TMP_PREFIX) and not stat.S_ISDIR(st.st_mode):
            with open_dir(root, parts[:-1]) as dfd:
                os.unlink(parts[-1], dir_fd=dfd)
            removed += 1
    return removed
