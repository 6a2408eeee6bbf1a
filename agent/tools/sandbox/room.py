"""The session's file room: every path the agent names stays inside it.

A `Sandbox` is a room (a directory, `room_id` is its name) plus a relative working directory in it
(`workspace`). Paths are relative to the workspace; `..` is resolved lexically and may move around
the room but never above it. Refused with `ToolError` before anything is touched: absolute paths
(`/x`, `C:x`), `~`, NUL and control characters, backslashes, percent-encoded dots / separators /
percent signs (`%2e`, `%2f`, `%5c`, `%25`, overlong `%c0`), Unicode lookalikes of `/` `.` `\\`,
components over 255 bytes or paths over 4096 bytes, and any symlink whose target is outside the
room (checked with `realpath` and a separator-boundary containment test, not a string prefix).

Reads and writes only touch regular files. Devices, fifos and sockets are refused (opening one can
block or have side effects). A regular file with more than one hard link is refused for read and
write: a hard link inside the room may share its inode with a file outside, and nothing tells where
the other name lives, so reading would leak and writing would modify that outside file. Deleting
such a file (or any symlink) only removes the name in the room, so delete allows it.

Crashes: the rename is a write's only visible step, so a killed process leaves each file either as
it was or as written, plus at most a temp file, which `sweep_temp()` removes when the room is opened
for the next run (under the session's lease nobody else writes there). `fingerprint()` names what a
path holds, so a resume can tell whether an interrupted call's write happened (`RoomEffect` in
`agent.core.tool_spec`): the room a resumed run leaves is the room an uncrashed run leaves.

Snapshots: `manifest()` maps each regular file (room-relative POSIX path) to `sha256:<hex>` and puts
its bytes in the `BlobStore`; unchanged files are skipped via a (size, mtime_ns, inode, ctime_ns)
cache that only trusts entries older than the file-system clock tick (the "racy git" rule) and is
dropped on every write through the sandbox. `restore()` makes the room equal to a manifest; it fetches
and verifies every needed blob before changing anything. `fork_room()` materializes a manifest into a
new room (plain copies: hard links to blobs would be refused by the rules above), leaving this room
untouched. Symlinks, special files and hard-linked files are not part of a manifest; restore removes
them, and temp files a crash left behind. The primitives (and the check-then-use gap): `agent.tools.sandbox.paths`.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from agent.core.errors import BackendUnavailable, ConfigError, ToolError
from agent.tools.sandbox.paths import (
    CLOEXEC,
    NOFOLLOW,
    TMP_PREFIX,
    check_manifest,
    check_regular,
    content_digest,
    encode_text,
    entry_kind,
    fingerprint,
    inside,
    open_dir,
    os_errors,
    path_parts,
    refuse,
    replace_file,
    scan,
    sweep_temp,
)
from agent.tools.sandbox.room_types import _RACY_NS, EventCallback, Manifest, TextWindow, _CacheKey
from checkpointing.blobs import Blobs
from checkpointing.exceptions import BlobError


class Sandbox:
    """A session's room and working directory; file operations that cannot leave the room."""

    def __init__(
        self,
        room_dir: Path | str,
        workspace: str = "",
        max_write_bytes: int = 1_000_000,
        max_file_bytes: int = 10_000_000,
        *,
        blobs: Blobs | None = None,
        on_event: EventCallback | None = None,
    ) -> None:
        room = Path(room_dir)
        existed = room.exists()
        try:
            room.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise BackendUnavailable(f"cannot create sandbox room {room}: {err.strerror}; check base_dir") from err
        self.room_dir = Path(os.path.realpath(room))
        if not self.room_dir.is_dir():
            raise ConfigError(f"sandbox room {room} is not a directory; pick another room id")
        self._root = str(self.room_dir)
        self.max_write_bytes = max_write_bytes
        self.max_file_bytes = max_file_bytes
        self.blobs = blobs
        self._on_event = on_event
        self._cache: dict[str, tuple[_CacheKey, str]] = {}
        self._destroyed = False
        self.refilled = False
        """Set by whoever rewrote the room from a checkpoint's manifest (`restore` changed it): the
        effects of tool calls after that checkpoint are not in it, so a resume applies them again
        (`agent.tools.execute`)."""
        self._workspace: tuple[str, ...] = ()
        self.change_dir(workspace or ".")
        if not existed:
            self._emit("created", {})

    # ----- identity and paths -------------------------------------------------------------------

    @property
    def room_id(self) -> str:
        """The room's name (its directory name)."""
        return self.room_dir.name

    @property
    def workspace(self) -> str:
        """The working directory, relative to the room ('' is the room itself)."""
        return "/".join(self._workspace)

    def change_dir(self, path: str) -> str:
        """Move the working directory (created if missing); returns the new room-relative workspace."""
        parts = self._locate(path)
        with os_errors(path), open_dir(self._root, parts, create=True):
            pass
        self._workspace = parts
        return self.workspace

    def resolve(self, path: str) -> Path:
        """The absolute path inside the room that `path` names; raises ToolError if it would escape."""
        return self.room_dir.joinpath(*self._locate(path))

    def _locate(self, path: str, follow_last: bool = True) -> tuple[str, ...]:
        if self._destroyed:
            raise ToolError(f"sandbox room {self.room_id} was destroyed; start a new session")
        parts = path_parts(path, self._workspace)
        if not parts:
            return ()
        full = (*self._contain(parts[:-1], path), parts[-1])
        if follow_last and os.path.islink(os.path.join(self._root, *full)):
            return self._contain(full, path)
        return full

    def room_path(self, path: str, follow_last: bool = True) -> str:
        """The room-relative POSIX path that workspace path `path` names (the form of a manifest).

        `follow_last`: a symlink at the end is resolved (what a write replaces) or not (what a
        delete removes). Raises ToolError for a path that is refused or is the room itself.
        """
        parts = self._locate(path, follow_last)
        if not parts:
            raise ToolError(f"{path!r} is the room itself; name a file")
        return "/".join(parts)

    def _contain(self, parts: tuple[str, ...], shown: str) -> tuple[str, ...]:
        real = os.path.realpath(os.path.join(self._root, *parts))
        if not inside(self._root, real):
            raise refuse(shown, "a symlink in the path points outside the room")
        if os.path.islink(real):
            raise refuse(shown, "a symlink in the path loops back on itself")
        rel = os.path.relpath(real, self._root)
        return () if rel == "." else tuple(rel.split(os.sep))

    # ----- file operations ----------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """Whether `path` names something in the room (the path must still be allowed)."""
        parts = self._locate(path, follow_last=False)
        try:
            os.lstat(os.path.join(self._root, *parts))
        except OSError:
            return False
        return True

    def fingerprint(self, room_path: str) -> str | None:
        """What is at room-relative `room_path` now (see `paths.fingerprint`); no link is followed."""
        return fingerprint(self._root, path_parts(room_path), lambda parts: self._read_bytes(parts, room_path))

    def sweep_temp(self) -> int:
        """Remove the temp files that writes killed before their rename left; returns how many.

        Call it only while no write runs in the room (when a run opens it, under the lease)."""
        with os_errors("(room)"):
            return sweep_temp(self._root, self._scan())

    def list_dir(self, path: str = ".") -> list[dict[str, Any]]:
        """Entries of a directory, sorted by name: {name, type: file|dir|symlink|other, size}."""
        parts = self._locate(path)
        out: list[dict[str, Any]] = []
        with os_errors(path), open_dir(self._root, parts) as dfd, os.scandir(dfd) as it:
            for entry in it:
                if entry.name.startswith(TMP_PREFIX):
                    continue
                st = entry.stat(follow_symlinks=False)
                kind = entry_kind(st.st_mode)
                out.append({"name": entry.name, "type": kind, "size": st.st_size if kind == "file" else None})
        return sorted(out, key=lambda e: e["name"])

    def _read_bytes(self, parts: tuple[str, ...], shown: str) -> bytes:
        if not parts:
            raise ToolError(f"{shown!r} is the room itself; name a file, or use list_files")
        with os_errors(shown), open_dir(self._root, parts[:-1]) as dfd:
            check_regular(os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False), shown)
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW | CLOEXEC, dir_fd=dfd)
            try:
                st = os.fstat(fd)
                check_regular(st, shown)
                if st.st_size > self.max_file_bytes:
                    raise ToolError(f"{shown!r} is {st.st_size} bytes, over the {self.max_file_bytes} byte limit")
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                return b"".join(chunks)
            finally:
                os.close(fd)

    def read_window(self, path: str, offset: int = 0, limit: int | None = None) -> TextWindow:
        """Characters [offset, offset+limit) of a UTF-8 text file (bad bytes shown as U+FFFD)."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ToolError("offset and limit must be >= 0")
        text = self._read_bytes(self._locate(path), path).decode("utf-8", errors="replace")
        end = len(text) if limit is None else offset + limit
        return TextWindow(text[offset:end], min(offset, len(text)), len(text))

    def read_text(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        """The text of a file, from character `offset`, at most `limit` characters."""
        return self.read_window(path, offset, limit).text

    def write_text(self, path: str, content: str) -> int:
        """Create or replace a file with `content` (UTF-8); parents are created. Returns bytes written."""
        if not isinstance(content, str):
            raise ToolError("content must be text")
        data = encode_text(content)
        if len(data) > self.max_write_bytes:
            raise ToolError(
                f"content is {len(data)} bytes, over the {self.max_write_bytes} byte write limit; "
                "split it into smaller files"
            )
        parts = self._locate(path)
        if not parts:
            raise ToolError(f"{path!r} is the room itself; name a file")
        self._write_bytes(parts, data, path, replace_any=False)
        return len(data)

    def _write_bytes(self, parts: tuple[str, ...], data: bytes, shown: str, replace_any: bool) -> None:
        self._cache.pop("/".join(parts), None)
        with os_errors(shown), open_dir(self._root, parts[:-1], create=True) as dfd:
            name = parts[-1]
            try:
                st: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and (stat.S_ISDIR(st.st_mode) or not replace_any):
                check_regular(st, shown)
            replace_file(dfd, name, data)

    def edit(self, path: str, old: str, new: str) -> int:
        """Replace the one exact occurrence of `old` with `new`; returns the file's new size in bytes."""
        return self.write_text(path, self.edited(path, old, new))

    def edited(self, path: str, old: str, new: str) -> str:
        """The text `edit` would write (nothing is changed); raises the ToolError `edit` would."""
        if not old:
            raise ToolError("old text is empty; give the exact text to replace")
        try:
            text = self._read_bytes(self._locate(path), path).decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path!r} is not UTF-8 text; it cannot be edited, write it anew instead") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old text not found in {path!r}; read_file it and copy the exact text (whitespace counts)")
        if count > 1:
            raise ToolError(
                f"old text appears {count} times in {path!r}; include more surrounding text to make it unique"
            )
        return text.replace(old, new, 1)

    def delete(self, path: str) -> None:
        """Delete a file, a symlink (not its target) or an empty directory."""
        parts = self._locate(path, follow_last=False)
        if len(parts) <= len(self._workspace) and parts == self._workspace[: len(parts)]:
            raise ToolError(f"{path!r} is the room or the workspace itself; it cannot be deleted")
        self._cache.pop("/".join(parts), None)
        with os_errors(path), open_dir(self._root, parts[:-1]) as dfd:
            st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(parts[-1], dir_fd=dfd)
                return
            try:
                os.rmdir(parts[-1], dir_fd=dfd)
            except OSError:
                raise ToolError(f"directory {path!r} is not empty; delete the files in it first") from None

    # ----- snapshots ----------------------------------------------------------------------------

    def _scan(self) -> list[tuple[str, os.stat_result]]:
        if self._destroyed:
            raise ToolError(f"sandbox room {self.room_id} was destroyed; start a new session")
        return scan(self._root)

    def _file_ref(self, rel: str, st: os.stat_result, store: Blobs | None) -> str:
        key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        hit = self._cache.get(rel)
        if hit is not None and hit[0] == key and (store is None or store.exists(hit[1])):
            return hit[1]
        started = time.time_ns()
        data = self._read_bytes(tuple(rel.split("/")), rel)
        ref = store.put(data) if store is not None else content_digest(data)
        if st.st_mtime_ns < started - _RACY_NS:
            self._cache[rel] = (key, ref)
        return ref

    def _store(self, blobs: Blobs | None) -> Blobs:
        store = blobs or self.blobs
        if store is None:
            raise ConfigError("the sandbox has no blob store; pass blobs= to Sandbox or to this call")
        return store

    def manifest(self, blobs: Blobs | None = None) -> Manifest:
        """Snapshot: {room-relative path: 'sha256:<hex>'} of every regular file, contents put in blobs."""
        store = self._store(blobs)
        out: Manifest = {}
        size = 0
        with os_errors("(room)"):
            for rel, st in self._scan():
                tmp = rel.rpartition("/")[2].startswith(TMP_PREFIX)
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and not tmp:
                    out[rel] = self._file_ref(rel, st, store)
                    size += st.st_size
        self._emit("snapshot", {"files": len(out), "bytes": size})
        return out

    def restore(self, manifest: Manifest, blobs: Blobs | None = None) -> int:
        """Make the room exactly the manifest: extra entries removed, missing/changed files written.
        Returns how many entries it wrote or removed (0: the room was the manifest already)."""
        store = self._store(blobs)
        wanted = check_manifest(manifest)
        with os_errors("(room)"):
            current = self._scan()
            kinds = {rel: st for rel, st in current}
            to_write: dict[str, bytes] = {}
            for rel, ref in wanted.items():
                st = kinds.get(rel)
                same = st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1
                if same and st is not None and self._file_ref(rel, st, None) == ref:
                    continue
                try:
                    to_write[rel] = store.get(ref)
                except BlobError as err:
                    raise BackendUnavailable(f"cannot restore room {self.room_id}: {err}") from err
            keep = {"/".join(p.split("/")[:i]) for p in wanted for i in range(1, p.count("/") + 1)}
            keep.update("/".join(self._workspace[:i]) for i in range(1, len(self._workspace) + 1))
            removed = 0
            for rel, st in current:
                parts = tuple(rel.split("/"))
                if stat.S_ISDIR(st.st_mode):
                    if rel not in keep:
                        with open_dir(self._root, parts[:-1]) as dfd:
                            os.rmdir(parts[-1], dir_fd=dfd)
                        removed += 1
                elif rel not in wanted or not stat.S_ISREG(st.st_mode):
                    self._cache.pop(rel, None)
                    with open_dir(self._root, parts[:-1]) as dfd:
                        os.unlink(parts[-1], dir_fd=dfd)
                    removed += 1
            for rel, data in to_write.items():
                self._write_bytes(tuple(rel.split("/")), data, rel, replace_any=True)
            with open_dir(self._root, self._workspace, create=True):
                pass
        self._emit("restored", {"files": len(wanted), "written": len(to_write), "removed": removed})
        return len(to_write) + removed

    def fork_room(self, manifest: Manifest, blobs: Blobs | None, new_room_dir: Path | str) -> Sandbox:
        """A new room holding exactly `manifest` (a branch's own copy); this room is not touched."""
        store = self._store(blobs)
        new = Path(os.path.realpath(new_room_dir))
        if inside(self._root, str(new)) or inside(str(new), self._root):
            raise ConfigError(f"fork room {new} overlaps room {self.room_dir}; use a sibling directory")
        if new.exists() and (not new.is_dir() or any(new.iterdir())):
            raise ConfigError(f"fork room {new} already exists and is not empty; use a new room id")
        child = Sandbox(
            new,
            self.workspace,
            self.max_write_bytes,
            self.max_file_bytes,
            blobs=store,
            on_event=self._on_event,
        )
        child.restore(manifest, store)
        return child

    def destroy(self) -> None:
        """Delete the room and everything in it; the sandbox refuses every later operation."""
        if self._destroyed:
            return
        shutil.rmtree(self._root, ignore_errors=True)
        self._destroyed = True
        self._cache.clear()
        self._emit("destroyed", {})

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self._on_event is not None:
            self._on_event(kind, {"room_id": self.room_id, "workspace": self.workspace, **payload})
