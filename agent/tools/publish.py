"""`publish_report`: copies a file of the room to its `outbox/` (the demo's unsafe, approved step).

It stands for any action with an effect outside the agent's control (sending mail, posting to a
ticket system): declared `unsafe` and `requires_approval`, so a human is asked first and a crash
mid-call is reported as "outcome unknown" instead of being silently repeated.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.errors import ToolError
from agent.tools.base import ToolContext, ToolSpec


class PublishArgs(BaseModel):
    """Arguments of publish_report."""

    path: str = Field(description="the room file to publish, e.g. report.md")
    channel: str = Field(default="team", description="where to publish: a short name like team or board")


def _publish(ctx: ToolContext, path: str, channel: str = "team") -> str:
    if ctx.sandbox is None:
        raise ToolError("this session has no sandbox room")
    if not channel.isidentifier():
        raise ToolError(f"channel {channel!r} must be a simple name (letters, digits, _)")
    text = ctx.sandbox.read_text(path)
    target = f"outbox/{channel}-{path.replace('/', '_')}"
    ctx.sandbox.write_text(target, text)
    return f"published {path} to {channel} ({len(text)} chars) as {target}"


PUBLISH_REPORT = ToolSpec(
    name="publish_report",
    description="Publish a file of the room to a channel (needs a human's approval).",
    args_schema=PublishArgs,
    func=_publish,
    effect="unsafe",
    requires_approval=True,
)
