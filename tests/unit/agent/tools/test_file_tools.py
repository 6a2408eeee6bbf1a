"""The file tools as the acting node runs them: ToolSpec.invoke with a ToolContext."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.core.errors import ToolError
from agent.core.tool_spec import ToolContext, ToolSpec
from agent.tools.file_tools import builtin_file_tools
from agent.tools.sandbox.room import Sandbox


@pytest.fixture
def tools() -> dict[str, ToolSpec]:
    """The built-in file tools by name."""
    return {t.name: t for t in builtin_file_tools()}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    """A tool context with a fresh sandbox."""
    return ToolContext(session_id="s1", tenant_id="t1", run_id="r1", sandbox=Sandbox(tmp_path / "room", "work"))


def test_tool_names_and_effects(tools: dict[str, ToolSpec]) -> None:
    """Reads are read_only, write is idempotent, edit and delete are unsafe."""
    assert {n: t.effect for n, t in tools.items()} == {
        "list_files": "read_only",
        "read_file": "read_only",
        "write_file": "idempotent",
        "edit_file": "unsafe",
        "delete_file": "unsafe",
    }
    for tool in tools.values():
        assert tool.to_openai()["function"]["parameters"]["type"] == "object"


def test_write_list_read_edit_delete(tools: dict[str, ToolSpec], ctx: ToolContext) -> None:
    """The five tools work together on one file and report what they did."""
    assert tools["write_file"].invoke(ctx, {"path": "notes/a.md", "content": "hello world"}) == (
        "wrote 11 bytes to notes/a.md"
    )
    assert tools["list_files"].invoke(ctx, {}) == "notes/"
    assert tools["list_files"].invoke(ctx, {"path": "notes"}) == "a.md (11 bytes)"
    assert tools["read_file"].invoke(ctx, {"path": "notes/a.md"}) == "hello world"
    assert "edited notes/a.md" in tools["edit_file"].invoke(ctx, {"path": "notes/a.md", "old": "world", "new": "you"})
    assert tools["read_file"].invoke(ctx, {"path": "notes/a.md"}) == "hello you"
    assert tools["delete_file"].invoke(ctx, {"path": "notes/a.md"}) == "deleted notes/a.md"
    assert tools["list_files"].invoke(ctx, {"path": "notes"}) == "notes: empty directory"


def test_read_file_pages_with_a_continuation_note(tools: dict[str, ToolSpec], ctx: ToolContext) -> None:
    """A cut read ends with a note giving the offset to continue from; the last page says where it ends."""
    tools["write_file"].invoke(ctx, {"path": "long.txt", "content": "0123456789"})
    first = tools["read_file"].invoke(ctx, {"path": "long.txt", "limit": 4})
    assert first == "0123\n[characters 0-4 of 10; call read_file with offset=4 for more]"
    last = tools["read_file"].invoke(ctx, {"path": "long.txt", "offset": 8, "limit": 4})
    assert last == "89\n[characters 8-10 of 10]"
    with pytest.raises(ToolError, match="past the end"):
        tools["read_file"].invoke(ctx, {"path": "long.txt", "offset": 10})


def test_escape_through_a_tool_is_a_tool_error(tools: dict[str, ToolSpec], ctx: ToolContext, tmp_path: Path) -> None:
    """A tool call naming a path outside the room fails with a ToolError and writes nothing."""
    with pytest.raises(ToolError, match="refused"):
        tools["write_file"].invoke(ctx, {"path": "../../escaped.txt", "content": "x"})
    with pytest.raises(ToolError, match="refused"):
        tools["read_file"].invoke(ctx, {"path": "/etc/passwd"})
    assert not (tmp_path / "escaped.txt").exists()


def test_bad_arguments_are_rejected_by_the_schema(tools: dict[str, ToolSpec], ctx: ToolContext) -> None:
    """Missing or out-of-range arguments fail validation before the tool runs."""
    with pytest.raises(ValidationError):
        tools["write_file"].invoke(ctx, {"path": "a.txt"})
    with pytest.raises(ValidationError):
        tools["read_file"].invoke(ctx, {"path": "a.txt", "limit": 0})


def test_tools_without_sandbox_say_so(tools: dict[str, ToolSpec]) -> None:
    """A session without a room gets a clear error instead of a crash."""
    bare = ToolContext(session_id="s1", tenant_id="t1", run_id="r1")
    with pytest.raises(ToolError, match="no sandbox"):
        tools["list_files"].invoke(bare, {})


def test_empty_file_is_reported(tools: dict[str, ToolSpec], ctx: ToolContext) -> None:
    """Reading an empty file says it is empty rather than returning nothing."""
    tools["write_file"].invoke(ctx, {"path": "e.txt", "content": ""})
    assert tools["read_file"].invoke(ctx, {"path": "e.txt"}) == "e.txt: empty file"
