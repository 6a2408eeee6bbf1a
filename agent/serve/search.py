"""The API's thread search as filters of the index of sessions (`ChatSessionManager.search`).

A thread's `metadata` is the user's metadata plus `graph_id`, `assistant_id` and `user_id`; its
`status` (idle / busy / interrupted / error) comes from the newest run's status and the runs going
in this process. Both become filters of one indexed query, so a search or a count reads no
session document, however many sessions the tenant has.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent.core.statuses import RunStatus
from agent.serve.auth import Principal
from agent.serve.serve_context import ASSISTANT_ID, GRAPH_ID, ServeContext
from checkpointing.session_index import RowFilter

SORT_KEYS = {"updated_at": "activity", "created_at": "created", "thread_id": "session_id", "status": "status"}
"""The API's `sort_by` as index orders (`status` sorts by the session status)."""
LAST_RUN = ("last_run_status",)
ERROR = (RunStatus.FAILED.value, RunStatus.RECOVERY_BLOCKED.value)
INTERRUPTED = (RunStatus.PAUSED.value, RunStatus.RUNNING.value, RunStatus.INTERRUPTED.value)


def search_filters(body: dict[str, Any], ctx: ServeContext, principal: Principal) -> RowFilter | None:
    """The index filter of a search body (`ids`, `metadata`, `status`) for the caller; None: nothing
    can match. The user is the caller's, or the body's `metadata.user_id` for a caller who sees
    every user of the tenant."""
    user = principal.user_id
    meta: list[tuple[tuple[str, ...], Any]] = []
    constants = {"graph_id": GRAPH_ID, "assistant_id": ASSISTANT_ID}
    for key, value in (body.get("metadata") or {}).items():
        if key in constants:
            if value != constants[key]:
                return None
        elif key == "user_id":
            if principal.user_id is not None and value != principal.user_id:
                return None
            if not isinstance(value, str):
                return None
            user = value
        else:
            meta.append((("metadata", str(key)), value))
    ids = [str(i) for i in body["ids"]] if body.get("ids") else None
    where = RowFilter(user_id=user, meta=meta, ids=ids)
    status = body.get("status")
    if not status:
        return where
    busy = [r.thread_id for r in ctx.engine.live(principal.tenant_id)]
    if status == "busy":
        return replace(where, ids=[i for i in busy if ids is None or i in ids])
    where = replace(where, exclude_ids=busy)
    if status == "error":
        return replace(where, meta_any=[(LAST_RUN, ERROR)])
    if status == "interrupted":
        return replace(where, meta_any=[(LAST_RUN, INTERRUPTED)])
    if status == "idle":
        return replace(where, meta_not=[(LAST_RUN, ERROR + INTERRUPTED)])
    return None
