"""Graph values, snapshots and stream chunks as the JSON the LangGraph Agent Server API sends.

Values go through `agent.core.results.jsonable`: LangChain messages become their `model_dump()` (what
`langgraph_sdk` and Studio read back), interrupts `{"value", "id"}`; anything else without a JSON
form becomes its `repr`, never a pickle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson
from langgraph.types import StateSnapshot
from starlette.responses import Response

from agent.core.results import jsonable  # the server's encoding of every value; also what workers publish live

INTERRUPT_KEY = "__interrupt__"


def checkpoint_ref(thread_id: str, config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`{thread_id, checkpoint_ns, checkpoint_id, checkpoint_map}` of a snapshot's config."""
    conf = (config or {}).get("configurable") or {}
    if not conf.get("checkpoint_id"):
        return None
    return {
        "thread_id": thread_id,
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
        "checkpoint_id": conf["checkpoint_id"],
        "checkpoint_map": jsonable(conf.get("checkpoint_map") or {}),
    }


def thread_state(thread_id: str, snap: StateSnapshot) -> dict[str, Any]:
    """A `StateSnapshot` as the API's ThreadState."""
    tasks = [
        {
            "id": t.id,
            "name": t.name,
            "path": jsonable(list(t.path)),
            "error": None if t.error is None else f"{type(t.error).__name__}: {t.error}",
            "interrupts": [jsonable(i) for i in t.interrupts],
            "checkpoint": None,
            "state": None,
            "result": jsonable(t.result),
        }
        for t in snap.tasks
    ]
    return {
        "values": jsonable(snap.values or {}),
        "next": list(snap.next),
        "tasks": tasks,
        "checkpoint": checkpoint_ref(thread_id, snap.config)
        or {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": None, "checkpoint_map": {}},
        "metadata": jsonable(snap.metadata or {}),
        "created_at": snap.created_at,
        "parent_checkpoint": checkpoint_ref(thread_id, snap.parent_config),
        "interrupts": [jsonable(i) for i in snap.interrupts],
    }


def empty_state(thread_id: str) -> dict[str, Any]:
    """The ThreadState of a thread that has no checkpoint yet."""
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": None, "checkpoint_map": {}},
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "interrupts": [],
    }


def dumps(data: Any) -> bytes:
    """Plain data as compact UTF-8 JSON (anything without a JSON form as its `repr`)."""
    try:
        return orjson.dumps(data, default=repr, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # an int beyond 64 bits, a nesting deeper than orjson's: the standard encoder
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=repr).encode()


def json_response(data: Any, status_code: int = 200) -> Response:
    """A JSON response of already-plain data (skips FastAPI's response-model pass on hot paths)."""
    return Response(dumps(data), status_code=status_code, media_type="application/json")
