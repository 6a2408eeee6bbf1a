"""What one saver call is about, read from its RunnableConfig: tenant, thread, run, namespace and
checkpoint id (validated), and the lease's fencing token.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.runnables import RunnableConfig

from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import shown, validate_id

_MAX_NS = 1024


def call_ids(config: RunnableConfig, default_tenant: str, default_run: str) -> dict[str, Any]:
    """{"tenant", "thread", "run", "ns", "cp_id"} of a call (`default_*` when the config has none);
    `InvalidIdError` for a missing thread id or an invalid id."""
    conf = config.get("configurable") or {}
    if conf.get("thread_id") is None:
        raise InvalidIdError("config['configurable']['thread_id'] is required: it names the session")
    ns = conf.get("checkpoint_ns", "") or ""
    if not isinstance(ns, str) or len(ns) > _MAX_NS or "\x00" in ns:
        raise InvalidIdError(f"invalid checkpoint_ns {shown(ns)}: a string without NUL, <= {_MAX_NS} chars")
    cp_id = conf.get("checkpoint_id")
    return {
        "tenant": validate_id(plain_id(conf.get("tenant_id") or default_tenant), "tenant_id"),
        "thread": str(conf["thread_id"]),
        "run": validate_id(plain_id(conf.get("run_id") or default_run), "run_id"),
        "ns": ns,
        "cp_id": str(cp_id) if cp_id else None,
    }


def fencing_token(config: RunnableConfig) -> int | None:
    """The lease's fencing token in the config: a write with one lower than the session's highest
    is refused (stale owner)."""
    token = (config.get("configurable") or {}).get("fencing_token")
    return token if isinstance(token, int) and not isinstance(token, bool) else None


def plain_id(v: Any) -> Any:
    """A UUID id as its string (LangGraph callers pass either)."""
    return str(v) if isinstance(v, uuid.UUID) else v
