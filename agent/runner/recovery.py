"""The ordered recovery procedure (docs/concepts/recovery.md), used by `AgentRunner.resume`.

    read the session header
     -> acquire the SessionLease
     -> validate tenant / agent / branch / schema version / graph version
     -> restore TaskExecutionState
     -> validate the runtime surface digest and the toolset hash
     -> restore canonical messages (LangChain messages, tool calls paired)
     -> rebuild LoopRuntime / sandbox        (done by the runner when the graph continues)
     -> continue the graph from its next node

A failing step raises `RecoveryBlocked(step, reason, expected, found)`; the caller marks the run
RECOVERY_BLOCKED and logs an event, and nothing else is touched: no state is cleared, no file
rewritten. `accept_changes` lists the pins the operator re-pins explicitly (recorded in an event
by the caller); nothing is ever re-pinned silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agent.core.errors import RecoveryBlocked
from agent.loop.message_view import MessageView, check_tool_pairs
from agent.loop.surface import SurfacePins
from agent.session.session import ChatSession
from checkpointing.exceptions import CheckpointingError, OldFormatError
from graph.schema import SCHEMA_VERSION

if TYPE_CHECKING:  # LangChain only when messages are restored: the doctor checks their views
    from langchain_core.messages import BaseMessage

# Pins that `--accept-changes` may re-pin, with the reason a mismatch is reported under.
PIN_REASONS = {
    "state_schema_version": "state schema version changed",
    "graph_version": "graph version changed (nodes or edges differ)",
    "tool_shape_hash": "toolset changed (tools added, removed, or their schema/effect changed)",
    "permissions_hash": "tool permissions changed",
    "toolset_hash": "toolset changed (tools added, removed, or their schema/effect changed)",
    "projection_digest": "message projection config changed (system prompt, planning, compression, window)",
    "surface_digest": "runtime surface changed (model or skill)",
}


OLD_FORMAT = "on-disk format too old"


class OldFormatBlocked(RecoveryBlocked):
    """Recovery met a file of an older on-disk format, which this version refuses (and never rewrites)."""

    def __init__(self, step_name: str, err: OldFormatError) -> None:
        super().__init__(step_name, OLD_FORMAT, "format 2", f"{err.path}:{err.line} (format 1)")
        self.args = (
            f"RECOVERY_BLOCKED at {step_name}: {OLD_FORMAT} ({err.path}:{err.line} is in on-disk format 1, "
            "this agentrt reads format 2); state was left untouched: finish the session with the agentrt "
            "that wrote it, or start a new session.",
        )


@contextmanager
def step(name: str, reason: str = "corrupt or missing data") -> Iterator[None]:
    """Turn a storage/decoding failure inside a step into `RecoveryBlocked`."""
    try:
        yield
    except RecoveryBlocked:
        raise
    except OldFormatError as err:
        raise OldFormatBlocked(name, err) from err
    except (CheckpointingError, ValueError, KeyError) as err:
        raise RecoveryBlocked(name, f"{reason}: {err}") from err


def check_header(header: dict[str, Any] | None, session: ChatSession) -> None:
    """Step 1: the session header exists and names this tenant/agent/session."""
    if header is None:
        raise RecoveryBlocked("read_header", "session header missing (events.jsonl)", "a header", None)
    for key in ("tenant_id", "session_id"):
        if header.get(key) != getattr(session, key):
            raise RecoveryBlocked("read_header", f"header {key} mismatch", getattr(session, key), header.get(key))


def check_identity(doc: dict[str, Any], session: ChatSession, agent_id: str, branches: set[str]) -> None:
    """Step 3a: tenant, agent and branch of the checkpoint document."""
    if doc.get("tenant_id") != session.tenant_id:
        raise RecoveryBlocked("validate_tenant", "tenant mismatch", session.tenant_id, doc.get("tenant_id"))
    if doc.get("agent_id") not in (None, agent_id) or session.agent_id != agent_id:
        raise RecoveryBlocked("validate_agent", "agent mismatch", agent_id, doc.get("agent_id") or session.agent_id)
    branch = doc.get("branch_id") or session.current_branch_id
    if branch not in branches:
        raise RecoveryBlocked("validate_branch", "branch missing from the event log", sorted(branches), branch)


def stored_pins(doc: dict[str, Any]) -> dict[str, Any]:
    """The pins a checkpoint was written under (from its metadata and runtime snapshot)."""
    meta = doc.get("metadata") or {}
    snap = doc.get("runtime_snapshot") or {}
    out = {k: meta.get(k) for k in PIN_REASONS}
    out["graph_version"] = doc.get("graph_version") or meta.get("graph_version")
    out["surface_digest"] = snap.get("surface_digest") or meta.get("surface_digest")
    out["toolset_hash"] = snap.get("toolset_hash") or meta.get("toolset_hash")
    return out


def compare_pins(
    found: dict[str, Any], pins: SurfacePins, accept: set[str], fields: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """Raise at the first pin in `fields` that differs and is not accepted; return accepted diffs."""
    current = {**pins.as_config(), "state_schema_version": SCHEMA_VERSION}
    accepted: dict[str, dict[str, Any]] = {}
    for name in fields:
        want, got = current.get(name), found.get(name)
        if got is None or got == want:
            continue
        if name in accept or "all" in accept:
            accepted[name] = {"was": got, "now": want}
            continue
        step_name = (
            "validate_schema"
            if name == "state_schema_version"
            else ("validate_graph" if name == "graph_version" else "validate_surface")
        )
        raise RecoveryBlocked(step_name, PIN_REASONS[name], want, got)
    return accepted


def restore_messages(state: dict[str, Any]) -> list[BaseMessage]:
    """Step 6: the restored `messages` are LangChain messages with tool pairs intact (a pending tail is allowed)."""
    from agent.loop.tool_pairs import view_of

    msgs = list(state.get("messages") or [])
    check_restored([view_of(m) for m in msgs])
    return msgs


def check_restored(messages: Sequence[MessageView]) -> None:
    """`restore_messages` on the views of the messages: every one a chat message, tool pairs intact."""
    with step("restore_messages", "message projection is corrupt"):
        if not all(m.is_message for m in messages):
            raise ValueError("the checkpoint's messages are not chat messages")
        check_tool_pairs(messages, allow_pending_tail=True)
