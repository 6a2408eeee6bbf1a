"""The `read_tool_result` tool: page through an archived tool result by character range.

Output format: one header line, a newline, then the raw characters of the range, unchanged:

    [read_tool_result tool_call_id=<id> tool=<name> offset=<o> end=<e> total=<n> next_offset=<e|none>]
    <characters o..e of the original result, exactly>

So `output.split("\\n", 1)[1]` is exactly `original[o:e]` (see `parse_read_output`), and a model
pages on with `offset=next_offset` until it reads `next_offset=none`.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from agent.core.errors import ToolError
from agent.core.tool_spec import ToolContext, ToolSpec
from agent.tools.tool_results import ToolResultSlice, ToolResultStore

NAME = "read_tool_result"
_HEADER_RE = re.compile(
    r"^\[read_tool_result tool_call_id=(?P<tool_call_id>.+?) tool=(?P<tool>\S*) offset=(?P<offset>\d+) "
    r"end=(?P<end>\d+) total=(?P<total>\d+) next_offset=(?P<next_offset>\d+|none)\]$"
)


class ReadToolResultArgs(BaseModel):
    """Arguments of `read_tool_result`."""

    tool_call_id: str = Field(description="The call_id named in the archived tool message.")
    offset: int = Field(0, description="First character to read (0-based).")
    limit: int = Field(2000, description="How many characters to read.")


def format_slice(piece: ToolResultSlice) -> str:
    """The tool's output for one slice: header line, newline, raw characters."""
    nxt = "none" if piece.next_offset is None else str(piece.next_offset)
    header = (
        f"[read_tool_result tool_call_id={piece.tool_call_id} tool={piece.tool_name or '-'} "
        f"offset={piece.offset} end={piece.end} total={piece.total} next_offset={nxt}]"
    )
    return f"{header}\n{piece.text}"


def parse_read_output(output: str) -> tuple[dict[str, str], str]:
    """Split a `read_tool_result` output into its header fields and the exact raw characters."""
    header, sep, text = output.partition("\n")
    m = _HEADER_RE.match(header)
    if not m or not sep:
        raise ToolError(f"not a read_tool_result output: {header[:120]!r}")
    return m.groupdict(), text


def read_tool_result(ctx: ToolContext, tool_call_id: str, offset: int = 0, limit: int = 2000) -> str:
    """Read characters `[offset, offset + limit)` of the archived result of `tool_call_id`."""
    store = ctx.tool_results
    if not isinstance(store, ToolResultStore):
        raise ToolError("no tool results are archived in this session yet, so there is nothing to read")
    return format_slice(store.read(tool_call_id, offset, limit))


READ_TOOL_RESULT = ToolSpec(
    name=NAME,
    description=(
        "Read part of an earlier tool result that was archived to save context. Pass the call_id "
        "named in the archived message; the reply is one header line (with total size and "
        "next_offset) followed by the exact characters of the range. Continue with "
        "offset=next_offset until next_offset=none."
    ),
    args_schema=ReadToolResultArgs,
    func=read_tool_result,
    effect="read_only",
)
