"""`publish_report`: copies a file of the room to its `outbox/` (the demo's unsafe, approved step).

It stands for any action with an effect outside the agent's control (sending mail, posting to a
ticket system): declared `unsafe` and `requires_approval`, so a human is asked first and a crash
mid-call is reported as "outcome unknown" instead of being silently repeated. Its stand-in effect is
one atomic write in the room, so it declares its `RoomEffect`: a resume sees whether the outbox file
was written and finishes the call exactly once (see `agent.tools.journal`), never publishing twice
and never leaving the room without a publication the run went on to report.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.core.errors import ToolError
from agent.core.tool_spec import RoomEffect, ToolContext, ToolSpec
from agent.tools.sandbox.paths import content_digest
from agent.tools.sandbox.room import Sandbox


class PublishArgs(BaseModel):
    """Arguments of publish_report."""

    path: str = Field(description="the room file to publish, e.g. report.md")
    channel: str = Field(default="team", description="where to publish: a short name like team or board")


def _publication(ctx: ToolContext, path: str, channel: str) -> tuple[Sandbox, str, str, str]:
    """(room, outbox file, text to publish, the call's result) of a publication; nothing changed."""
    if not isinstance(ctx.sandbox, Sandbox):
        raise ToolError("this session has no sandbox room")
    if not channel.isidentifier():
        raise ToolError(f"channel {channel!r} must be a simple name (letters, digits, _)")
    text = ctx.sandbox.read_text(path)
    target = f"outbox/{channel}-{path.replace('/', '_')}"
    return ctx.sandbox, target, text, f"published {path} to {channel} ({len(text)} chars) as {target}"


def _publish(ctx: ToolContext, path: str, channel: str = "team") -> str:
    box, target, text, result = _publication(ctx, path, channel)
    box.write_text(target, text)
    return result


def _publish_effect(ctx: ToolContext, path: str, channel: str = "team") -> RoomEffect:
    box, target, text, result = _publication(ctx, path, channel)
    where = box.room_path(target)
    return RoomEffect(where, box.fingerprint(where), content_digest(text), result)


PUBLISH_REPORT = ToolSpec(
    name="publish_report",
    description="Publish a file of the room to a channel (needs a human's approval).",
    args_schema=PublishArgs,
    func=_publish,
    effect="unsafe",
    requires_approval=True,
    room_effect=_publish_effect,
)
