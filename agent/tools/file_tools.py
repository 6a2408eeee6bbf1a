"""Built-in file tools over the session's sandbox room (`ctx.sandbox`).

Paths are relative to the sandbox workspace; the sandbox refuses anything that would leave the
room (see `agent.tools.sandbox.room`). Every failure is a `ToolError` whose message tells the model what to
try instead.

Crashes: `write_file` is idempotent (its content is its argument, written atomically), so a resume
simply runs an interrupted call again. `edit_file` and `delete_file` are unsafe (running them twice
can differ from once) and declare their `RoomEffect`: the file's fingerprint before and after, so a
resume finishes an interrupted call exactly once, as the journal explains, and the room it leaves
is the room an uncrashed run leaves.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.core.errors import ToolError
from agent.core.tool_spec import RoomEffect, ToolContext, ToolSpec
from agent.tools.sandbox.paths import content_digest, encode_text
from agent.tools.sandbox.room import Sandbox

MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 500


def _sandbox(ctx: ToolContext) -> Sandbox:
    if not isinstance(ctx.sandbox, Sandbox):
        raise ToolError("this session has no sandbox room; file tools are unavailable")
    return ctx.sandbox


class ListFilesArgs(BaseModel):
    """Arguments of list_files."""

    path: str = Field(".", description="directory relative to the workspace; '.' is the workspace")


class ReadFileArgs(BaseModel):
    """Arguments of read_file."""

    path: str = Field(description="file relative to the workspace")
    offset: int = Field(0, ge=0, description="first character to return")
    limit: int = Field(20_000, ge=1, le=MAX_READ_CHARS, description="maximum number of characters")


class WriteFileArgs(BaseModel):
    """Arguments of write_file."""

    path: str = Field(description="file relative to the workspace; missing folders are created")
    content: str = Field(description="the complete new text of the file")


class EditFileArgs(BaseModel):
    """Arguments of edit_file."""

    path: str = Field(description="file relative to the workspace")
    old: str = Field(description="exact text to replace; must occur exactly once")
    new: str = Field(description="replacement text")


class DeleteFileArgs(BaseModel):
    """Arguments of delete_file."""

    path: str = Field(description="file, symlink or empty folder relative to the workspace")


def list_files(ctx: ToolContext, path: str = ".") -> str:
    """One line per entry: `name/` for folders, `name (N bytes)` for files."""
    entries = _sandbox(ctx).list_dir(path)
    if not entries:
        return f"{path}: empty directory"
    lines = []
    for entry in entries[:MAX_LIST_ENTRIES]:
        if entry["type"] == "dir":
            lines.append(f"{entry['name']}/")
        elif entry["type"] == "file":
            lines.append(f"{entry['name']} ({entry['size']} bytes)")
        else:
            lines.append(f"{entry['name']} ({entry['type']})")
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"... {len(entries) - MAX_LIST_ENTRIES} more entries not shown; list a subfolder")
    return "\n".join(lines)


def read_file(ctx: ToolContext, path: str, offset: int = 0, limit: int = 20_000) -> str:
    """The file's text from `offset`; a closing note says how to read the rest when cut."""
    window = _sandbox(ctx).read_window(path, offset, limit)
    if window.total_chars == 0:
        return f"{path}: empty file"
    if window.offset >= window.total_chars:
        raise ToolError(f"offset {offset} is past the end of {path!r} ({window.total_chars} characters)")
    if not window.truncated and window.offset == 0:
        return window.text
    note = f"[characters {window.offset}-{window.end} of {window.total_chars}"
    if window.truncated:
        note += f"; call read_file with offset={window.end} for more"
    return f"{window.text}\n{note}]"


def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or replace a file."""
    size = _sandbox(ctx).write_text(path, content)
    return f"wrote {size} bytes to {path}"


def edit_file(ctx: ToolContext, path: str, old: str, new: str) -> str:
    """Replace one unique occurrence of `old`."""
    size = _sandbox(ctx).edit(path, old, new)
    return f"edited {path} (now {size} bytes)"


def edit_effect(ctx: ToolContext, path: str, old: str, new: str) -> RoomEffect:
    """What `edit_file` will do: the file's fingerprint now and with the edit made."""
    box = _sandbox(ctx)
    data = encode_text(box.edited(path, old, new))
    where = box.room_path(path)
    return RoomEffect(where, box.fingerprint(where), content_digest(data), f"edited {path} (now {len(data)} bytes)")


def delete_file(ctx: ToolContext, path: str) -> str:
    """Delete a file, a symlink or an empty folder."""
    _sandbox(ctx).delete(path)
    return f"deleted {path}"


def delete_effect(ctx: ToolContext, path: str) -> RoomEffect:
    """What `delete_file` will do: what the path holds now, and nothing afterwards."""
    box = _sandbox(ctx)
    where = box.room_path(path, follow_last=False)
    before = box.fingerprint(where)
    if before is None:
        raise ToolError(f"{path!r} does not exist; use list_files to see what is there")
    return RoomEffect(where, before, None, f"deleted {path}")


def builtin_file_tools() -> list[ToolSpec]:
    """The file tools every session with a sandbox gets."""
    return [
        ToolSpec(
            "list_files",
            "List the files and folders in a directory of the workspace.",
            ListFilesArgs,
            list_files,
            effect="read_only",
        ),
        ToolSpec(
            "read_file",
            "Read a text file of the workspace, `limit` characters from `offset`.",
            ReadFileArgs,
            read_file,
            effect="read_only",
        ),
        ToolSpec(
            "write_file",
            "Create or overwrite a text file in the workspace with the given content.",
            WriteFileArgs,
            write_file,
            effect="idempotent",
        ),
        ToolSpec(
            "edit_file",
            "Replace an exact, unique piece of text in a workspace file.",
            EditFileArgs,
            edit_file,
            effect="unsafe",
            room_effect=edit_effect,
        ),
        ToolSpec(
            "delete_file",
            "Delete a file, symlink or empty folder in the workspace.",
            DeleteFileArgs,
            delete_file,
            effect="unsafe",
            room_effect=delete_effect,
        ),
    ]
