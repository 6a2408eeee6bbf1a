"""Running one tool call under the journal (`agent.tools.journal`): the resume policy.

`execute_with_journal` applies the resume policy: a COMPLETED call is replayed from the journal, a
FAILED one replays its error, an INTENT without an end is re-run only for `read_only` /
`idempotent` tools and otherwise surfaced to the model as "outcome unknown" -- unless its INTENT
holds a `room` effect (an unsafe tool whose only effect is one atomic write in the sandbox room).
Then the room says what happened: the file still `before` means the crash came before the write,
so the call runs now (for the first time); the file already `after` means the write happened, so
its COMPLETED record is written with the recorded `result` and the call is not run again; anything
else stays "outcome unknown". Either way the room a resumed run leaves is the uncrashed run's.

A call that may change the room (any effect but `read_only`) has the room's manifest written with
its COMPLETED record (the files go to the blob store first). A resume whose room is older than the
journal (`Sandbox.refilled`: made from the checkpoint on another machine, or after the room folder
was lost) restores each replayed call's manifest in turn, so the files a tool wrote before the crash
are there and no tool runs again for them. A COMPLETED record without a manifest (a journal written
before manifests were recorded) falls back to applying the call's room effect again when that is
safe (`_reapply`).
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any, Literal

from pydantic import ValidationError

from agent.core.errors import ModelCallFailed, ToolError
from agent.core.faults import crash_point
from agent.core.tool_spec import ToolContext, ToolSpec
from agent.tools.journal import RERUNNABLE, JournalEntryState, JournalStatus, ToolExecutionJournal

log = logging.getLogger("agentrt.tools")

ExecStatus = Literal["success", "error", "outcome_unknown", "needs_human"]


def unknown_outcome_text(name: str, call_id: str, hitl: bool) -> str:
    """What the model (or, with `hitl`, the human) is told of an unsafe call a crash interrupted."""
    if hitl:
        return (
            f"The tool {name} (call {call_id}) was started before a crash and its outcome is unknown. "
            "It has side effects, so it was not run again. Should it be run again? Check its effect "
            "first, then answer yes to re-run or no to continue without it."
        )
    return (
        f"Outcome unknown: the tool {name} (call {call_id}) was started before the run was interrupted "
        "and did not record a result. It has side effects, so it was NOT run again. Verify whether its "
        "effect happened (for example with a read-only tool) before calling it again."
    )


def _error_text(name: str, err: Exception) -> str:
    if isinstance(err, ValidationError):
        # The model's arguments did not fit the tool's parameters: name the field, not a stack of pydantic text.
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "arguments"
        return f"Error: invalid arguments for {name}: {loc}: {first['msg']}; call it again with valid arguments"
    if isinstance(err, ToolError):
        return f"Error: tool {name} failed: {err}"
    return f"Error: tool {name} raised {type(err).__name__}: {err}"


def execute_with_journal(
    journal: ToolExecutionJournal,
    run_id: str,
    tool_call: dict[str, Any],
    spec: ToolSpec,
    ctx: ToolContext,
    hitl_enabled: bool = False,
) -> tuple[str, ExecStatus, bool]:
    """Run one tool call under the journal's policy; returns (result text, status, replayed).

    `tool_call` is a LangChain tool call ({"name", "args", "id"}). `replayed` is True when the text
    came from the journal without calling the tool. Status `outcome_unknown` / `needs_human` (HITL
    on) mean an unsafe tool was interrupted mid-call; send the text to the model (or the human) as
    an error tool message. Tool exceptions become FAILED records and an `error` status.
    """
    call_id = tool_call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise ModelCallFailed(
            f"tool call {spec.name} has no id, so it cannot be journaled; the model must give every "
            "tool call an id (check the model adapter)"
        )
    args = tool_call.get("args") or {}
    if spec.state_only:
        return _run_unjournaled(spec, ctx, args)
    state = journal.lookup(run_id, call_id)
    if state.status is JournalStatus.COMPLETED:
        if ctx.sandbox is not None and ctx.sandbox.refilled:
            if state.room_manifest is not None:
                ctx.sandbox.restore(state.room_manifest)
            else:
                _reapply(state, spec, ctx, args)
        return state.result or "", "success", True
    if state.status is JournalStatus.FAILED:
        return state.error or "", "error", True
    if state.status is JournalStatus.INTENT_ONLY and spec.effect not in RERUNNABLE:
        settled = _settle(state, ctx)
        if settled is RoomOutcome.DONE:
            result = str((state.room or {}).get("result", ""))
            journal.record_completed(run_id, call_id, result, room_manifest=_room_snapshot(spec, ctx))
            return result, "success", True
        if settled is RoomOutcome.UNKNOWN:
            status: ExecStatus = "needs_human" if hitl_enabled else "outcome_unknown"
            return unknown_outcome_text(spec.name, call_id, hitl_enabled), status, False
    try:
        room = spec.expected_effect(ctx, args) if spec.effect not in RERUNNABLE else None
    except Exception:
        room = None  # the call fails the same way below, and its FAILED record says why
    journal.record_intent(run_id, call_id, spec.name, args, spec.effect, room)
    try:
        result = spec.invoke(ctx, args)
    except Exception as err:
        crash_point("after_tool_execute")
        text = _error_text(spec.name, err)
        journal.record_failed(run_id, call_id, text)
        return text, "error", False
    crash_point("after_tool_execute")
    journal.record_completed(run_id, call_id, result, room_manifest=_room_snapshot(spec, ctx))
    return result, "success", False


def _room_snapshot(spec: ToolSpec, ctx: ToolContext) -> dict[str, str] | None:
    """The room as a call that may have changed it left it (its files put in the blob store), for
    the call's COMPLETED record; None for a read-only call or a session without a room."""
    sandbox = ctx.sandbox
    if sandbox is None or sandbox.blobs is None or spec.effect == "read_only":
        return None
    return sandbox.manifest()


class RoomOutcome(StrEnum):
    """What the room says about an unsafe call a crash interrupted (see the module docstring)."""

    NOT_DONE = "not_done"
    DONE = "done"
    UNKNOWN = "unknown"


def _settle(state: JournalEntryState, ctx: ToolContext) -> RoomOutcome:
    room = state.room
    if room is None or ctx.sandbox is None or not isinstance(room.get("path"), str):
        return RoomOutcome.UNKNOWN
    try:
        now = ctx.sandbox.fingerprint(room["path"])
    except ToolError:
        return RoomOutcome.UNKNOWN
    if now == room.get("after"):
        return RoomOutcome.DONE
    if now == room.get("before"):
        return RoomOutcome.NOT_DONE
    return RoomOutcome.UNKNOWN


def _reapply(state: JournalEntryState, spec: ToolSpec, ctx: ToolContext, args: Any) -> None:
    """A COMPLETED call replayed into a room refilled from an older checkpoint (another machine's,
    or a lost room folder): its effect on the room is not there, so it is applied again. An
    `idempotent` tool runs again (its result text stays the recorded one); an unsafe tool with a
    room effect runs again only when the room shows its file as it was `before` the call; any other
    tool is only replayed (its effects, if any, are outside the room)."""
    if spec.effect != "idempotent" and not (state.room is not None and _settle(state, ctx) is RoomOutcome.NOT_DONE):
        return
    try:
        spec.invoke(ctx, args)
    except Exception as err:  # the replayed result stands; the room differs from what the model was told
        log.warning("replaying %s into a refilled room: its effect could not be applied again: %s", spec.name, err)


def _run_unjournaled(spec: ToolSpec, ctx: ToolContext, args: Any) -> tuple[str, ExecStatus, bool]:
    """A state-only tool: its effect lives in the checkpoint, so it runs again on replay."""
    try:
        return spec.invoke(ctx, args), "success", False
    except Exception as err:
        return _error_text(spec.name, err), "error", False
