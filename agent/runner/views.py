"""What the read commands report, built from the session, its event log and its checkpoint thread.

Shared by `agent.runner.reading` (the runner: LangGraph reads the checkpoint) and
`agent.runner.reader` (the read-only commands: the saver's records are read directly). Nothing here
imports LangGraph: a `saver` is anything with `get_tuple` and `list` (`head_of`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent.core.errors import ConfigError, InputError, ToolError, UnknownToolResult
from agent.runner.branches import BranchHead, branch_pages, fork_point_of, head_of, room_id
from agent.session.branch_book import live_branches, read_book
from agent.tools.tool_results import ToolResultSlice, ToolResultStore
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.session.manager import ChatSessionManager
    from agent.session.session import ChatSession
    from checkpointing.blobs import Blobs
    from checkpointing.entry_log import EventLog


def checked_ids(
    settings: AgentSettings, session_id: str | None, tenant_id: str | None, user_id: str | None
) -> tuple[str, str | None, str]:
    """(tenant, user, session id) checked; a fresh session id when none is given."""
    try:
        tenant = validate_id(tenant_id or settings.session.tenant_id, "tenant id")
        user = validate_id(user_id, "user id") if user_id else None
        sid = validate_id(f"s-{uuid.uuid4().hex[:16]}" if session_id is None else session_id, "session id")
    except InvalidIdError as err:
        raise ConfigError(str(err)) from None
    return tenant, user, sid


def show_info(
    saver: Any,
    session: ChatSession,
    events: EventLog,
    checkpoint_id: str | None,
    next_nodes: list[str],
    pending: list[dict[str, Any]],
    last: int,
) -> dict[str, Any]:
    """`AgentRunner.show`'s answer, given what the checkpoint says (its id, next nodes, approvals)."""
    book = read_book(events)
    return {
        "session": session.to_dict(),
        "header": events.header(),
        "branches": book.live,
        "branch_names": book.names,
        "branch_info": branch_info(saver, session, events),
        "checkpoint": {"checkpoint_id": checkpoint_id, "next": next_nodes, "branch_id": session.current_branch_id},
        "pending_approvals": pending,
        "entries": [
            {
                "id": e.id,
                "parent_id": e.parent_id,
                "branch_id": e.branch_id,
                "type": e.type,
                "ts": e.ts,
                "summary": _summary(e.payload),
            }
            for e in events.last(last)
        ],
    }


def branch_info(saver: Any, session: ChatSession, events: EventLog) -> list[dict[str, Any]]:
    """Each branch: where it forked, its room, its checkpoint and its page history (from the log alone)."""
    pages = branch_pages(events)
    stats = events.branch_stats()  # first entry and count per branch: no entry is parsed
    out = []
    for branch, leaf in live_branches(events).items():
        created = _branch_created(events, stats[branch][0])
        at = head_of(saver, session, branch, (created or {}).get("checkpoint_id"))
        out.append(
            {
                "branch_id": branch,
                "current": branch == session.current_branch_id,
                "leaf_entry_id": leaf,
                "from_entry_id": (created or {}).get("from_entry_id"),
                "from_branch_id": (created or {}).get("from_branch_id"),
                "room_id": room_id(branch),
                "checkpoint_id": at.checkpoint_id,
                "entries": stats[branch][1],
                "page": pages.get(branch, []),
            }
        )
    return out


def branch_head(
    manager: ChatSessionManager, saver: Any, tenant: str, session_id: str, branch_id: str | None
) -> BranchHead | None:
    """The head of a session's branch (default: its current one); None when the session has no
    record (the caller reads the thread's newest checkpoint)."""
    from agent.core.errors import SessionNotFound

    try:
        session = manager.get(tenant, session_id)
    except SessionNotFound:
        return None
    branch = branch_id or session.current_branch_id
    events = manager.event_log(tenant, session_id)
    return head_of(saver, session, branch, fork_point_of(events, branch))


def _branch_created(events: EventLog, first_entry: str) -> dict[str, Any] | None:
    """The payload of the `branch_created` entry a branch starts with (None: it started otherwise)."""
    first = events.entry(first_entry)
    return dict(first.payload) if first.type == "branch_created" else None


def archived_slice(
    entries: list[Any], blobs: Blobs | None, tool_call_id: str, offset: int, limit: int
) -> ToolResultSlice:
    """A page of the archived tool result `tool_call_id` among a branch's `tool_result_store` entries."""
    try:
        return ToolResultStore.from_entries(entries, blobs).read(tool_call_id, offset, limit)
    except UnknownToolResult:
        raise
    except ToolError as err:  # the bounds of --offset / --limit: the caller's input, not a failed run
        raise InputError(
            str(err).replace("offset must", "--offset must").replace("limit must", "--limit must")
        ) from None


def _summary(payload: Mapping[str, Any] | None) -> str:
    if not payload:
        return ""
    text = json.dumps({k: v for k, v in payload.items() if k != "content"}, ensure_ascii=False, default=str)
    return text if len(text) <= 160 else text[:157] + "..."
