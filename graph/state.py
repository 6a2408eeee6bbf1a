"""TaskExecutionState: the graph-state boundary, with its reducers and field registry.

Field groups (snake_case):

| group      | fields                                                               | written by            |
|------------|----------------------------------------------------------------------|-----------------------|
| input      | agent_config, llm_model_config, dataset_list, user_input, user_intent| runner / init         |
| plan       | task_plan_text, task_todo_list, current_task                         | planning / acting     |
| loop       | iteration_count, finish_reason, loop_signal, last_iteration_result   | reasoning / refining  |
| protection | consecutive_failures, replan_count, context_compression_count,       | refining / memory /   |
|            | hitl_request, hitl_decision, error                                   | acting                |
| context    | execution_history_text, tool_result_store, messages                  | acting / refining ... |
| runtime    | active_skill, sandbox_manifest (path -> blob digest of the room)     | planning / acting     |
| accounting | model_call_count, tool_call_count, token_usage, last_usage, turn     | planning / reasoning  |

`execution_history_text`, `tool_result_store` and `messages` are LangGraph `DeltaChannel`s: a node
returns only the increment, and a checkpoint stores only that increment (plus a full snapshot every
`snapshot_frequency` updates). `messages` is the model's context, held once (system, human, AI and
tool messages, tool calls paired), with `add_messages` semantics (`merge_messages`): a message with
a known id replaces it, `RemoveMessage(id)` deletes one, and compression rewrites the whole list by
writing `RemoveMessage(REMOVE_ALL_MESSAGES)` followed by the new list. It is also what Studio's chat
shows. The canonical message DTOs (`checkpointing.messages`) are its on-disk form only.

The "add in step" rule: a new field must also be added to `FIELD_REGISTRY` (and so to the
codec, recovery validation and the tests); `tests/unit/graph/test_state.py` fails otherwise. Changing
the set of fields or their reducers needs a new `SCHEMA_VERSION`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage, convert_to_messages
from langchain_core.messages.utils import message_chunk_to_message
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from graph.schema import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported

APPEND_SNAPSHOT_EVERY = 500
"""A full snapshot of `execution_history_text` / `tool_result_store` every this many updates (one
per tool step): each snapshot holds the whole list, so a small value makes bytes grow with N^2."""

MESSAGES_SNAPSHOT_EVERY = 500
"""A full `messages` snapshot every this many updates (about two per tool step): replaying a read
walks at most this many stored increments, and the snapshots stay a small share of the bytes."""

LoopSignal = Literal["CONTINUE", "REPLAN", "FINISH", "COMPRESS"]


def extend_list(state: list[Any] | None, writes: Sequence[Any]) -> list[Any]:
    """DeltaChannel reducer: append every item of every write (a write is a list or one item)."""
    out = list(state or [])
    for w in writes:
        if isinstance(w, list):
            out.extend(w)
        else:
            out.append(w)
    return out


def _auto_id(msg: BaseMessage, position: int) -> str:
    # Deterministic (not add_messages' uuid4): replaying stored writes must rebuild the same ids.
    digest = hashlib.sha256(f"{msg.type}\0{msg.content!r}".encode()).hexdigest()[:12]
    return f"auto-{position}-{digest}"


def merge_messages(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """DeltaChannel reducer with `add_messages` semantics, over a batch of writes in one pass.

    A write is one message or a list of them (messages, dicts or tuples LangChain converts). A new
    id appends, a known id replaces in place, `RemoveMessage(id)` deletes, and
    `RemoveMessage(REMOVE_ALL_MESSAGES)` drops everything before it. A message without an id gets
    a deterministic one. Batching-invariant: folding writes one by one or all at once is the same.
    """
    out: list[BaseMessage | None] = list(state or [])
    index = _cached_index(out)
    if index is None:
        index = {str(m.id): i for i, m in enumerate(out) if m is not None and m.id is not None}
    live = len(out)  # messages not removed (a removed one is a None until the end)
    removed = False
    for write in writes:
        items = write if isinstance(write, list) else [write]
        for msg in convert_to_messages(items):
            msg = message_chunk_to_message(msg)
            if isinstance(msg, RemoveMessage):
                if msg.id == REMOVE_ALL_MESSAGES:
                    out, index, live, removed = [], {}, 0, False
                elif msg.id in index:
                    out[index.pop(msg.id)] = None
                    live -= 1
                    removed = True
                else:
                    raise ValueError(f"cannot remove message {msg.id!r}: the context has no message with that id")
                continue
            if msg.id is None:
                msg = msg.model_copy(update={"id": _auto_id(msg, live)})
            mid = str(msg.id)
            pos = index.get(mid)
            if pos is None:
                index[mid] = len(out)
                out.append(msg)
                live += 1
            else:
                out[pos] = msg
    if removed:
        return [m for m in out if m is not None]  # type: ignore[misc]
    result: list[AnyMessage] = out  # type: ignore[assignment]
    _remember_index(result, index)
    return result


_RECENT = 4
_recent: list[tuple[list[AnyMessage], dict[str, int]]] = []  # newest last
_recent_lock = threading.Lock()


def _cached_index(msgs: list[BaseMessage | None]) -> dict[str, int] | None:
    """A copy of the id -> position map of a recent merge's result, when `msgs` is (a shallow copy
    of) that list: the channel hands each step's result back as the next base, and rebuilding the
    map from every message each step would make a step cost grow with the history. Shared by every
    thread, and more than the last one kept, because LangGraph also merges a node's writes into the
    same base from a worker thread to route a conditional edge (local_read) before it applies them."""
    if not msgs:
        return None
    mid = len(msgs) // 2
    with _recent_lock:
        for prev, index in reversed(_recent):
            same = len(prev) == len(msgs) == len(index) and prev[0] is msgs[0] and prev[-1] is msgs[-1]
            if same and prev[mid] is msgs[mid]:
                return dict(index)  # the caller updates its map in place; the cached one stays
    return None


def _remember_index(result: list[AnyMessage], index: dict[str, int]) -> None:
    with _recent_lock:
        _recent.append((result, index))
        del _recent[:-_RECENT]


Messages = Annotated[list[AnyMessage], DeltaChannel(merge_messages, snapshot_frequency=MESSAGES_SNAPSHOT_EVERY)]
"""The `messages` channel type (the state and the graph's input schema must declare it alike)."""


def normalize_decision(value: Any) -> dict[str, Any]:
    """A human's answer to a tool approval as the `hitl_decision` value `{approved, reason}`.

    Accepts a dict (`approved` or `approve`, and `reason`), a bool, or approve/reject text: what a
    resume of the graph may carry, from the CLI, the Python API or the server.
    """
    if isinstance(value, dict):
        approved = value.get("approved", value.get("approve", False))
        return {"approved": bool(approved), "reason": value.get("reason")}
    if isinstance(value, str):
        return {"approved": value.strip().lower() in ("approve", "approved", "yes", "y", "ok", "true"), "reason": None}
    return {"approved": bool(value), "reason": None}


class TaskExecutionState(TypedDict, total=False):
    """The serializable state of one agent task; everything else lives in the LoopRuntime."""

    # input
    agent_config: dict[str, Any]
    llm_model_config: dict[str, Any]
    dataset_list: list[dict[str, Any]]
    user_input: str
    user_intent: str
    # plan
    task_plan_text: str
    task_todo_list: list[dict[str, Any]]
    current_task: str | None
    # loop
    iteration_count: int
    finish_reason: str | None
    loop_signal: LoopSignal | None
    last_iteration_result: dict[str, Any] | None
    # protection
    consecutive_failures: int
    replan_count: int
    context_compression_count: int
    hitl_request: dict[str, Any] | None
    hitl_decision: dict[str, Any] | None
    error: str | None
    # context
    execution_history_text: Annotated[list[str], DeltaChannel(extend_list, snapshot_frequency=APPEND_SNAPSHOT_EVERY)]
    tool_result_store: Annotated[
        list[dict[str, Any]], DeltaChannel(extend_list, snapshot_frequency=APPEND_SNAPSHOT_EVERY)
    ]
    messages: Messages
    # runtime snapshot (what the LoopRuntime is rebuilt with)
    active_skill: str | None
    sandbox_manifest: dict[str, str] | None
    # accounting
    model_call_count: int
    tool_call_count: int  # tool messages written in the session (compression never lowers it)
    token_usage: dict[str, int] | None  # input/output tokens of the reasoning replies, session total
    last_usage: dict[str, Any] | None
    turn: int


FieldGroup = Literal["input", "plan", "loop", "protection", "context", "runtime", "accounting"]

# name -> (group, reducer kind). Reducer kinds: "replace", "append" (DeltaChannel extend_list),
# "messages" (DeltaChannel merge_messages).
FIELD_REGISTRY: dict[str, tuple[FieldGroup, str]] = {
    "agent_config": ("input", "replace"),
    "llm_model_config": ("input", "replace"),
    "dataset_list": ("input", "replace"),
    "user_input": ("input", "replace"),
    "user_intent": ("input", "replace"),
    "task_plan_text": ("plan", "replace"),
    "task_todo_list": ("plan", "replace"),
    "current_task": ("plan", "replace"),
    "iteration_count": ("loop", "replace"),
    "finish_reason": ("loop", "replace"),
    "loop_signal": ("loop", "replace"),
    "last_iteration_result": ("loop", "replace"),
    "consecutive_failures": ("protection", "replace"),
    "replan_count": ("protection", "replace"),
    "context_compression_count": ("protection", "replace"),
    "hitl_request": ("protection", "replace"),
    "hitl_decision": ("protection", "replace"),
    "error": ("protection", "replace"),
    "execution_history_text": ("context", "append"),
    "tool_result_store": ("context", "append"),
    "messages": ("context", "messages"),
    "active_skill": ("runtime", "replace"),
    "sandbox_manifest": ("runtime", "replace"),
    "model_call_count": ("accounting", "replace"),
    "tool_call_count": ("accounting", "replace"),
    "token_usage": ("accounting", "replace"),
    "last_usage": ("accounting", "replace"),
    "turn": ("accounting", "replace"),
}


class RouteInput(TypedDict, total=False):
    """What the routing functions read. Typed with it, a router gets these two channels from
    LangGraph, which then re-applies only their writes to route (not the messages reducer over
    the whole history, twice a tool step)."""

    loop_signal: LoopSignal | None
    last_iteration_result: dict[str, Any] | None


class GraphInput(TypedDict, total=False):
    """What a caller may send: `user_input`, or Studio's chat `messages`."""

    user_input: str
    messages: Messages
    dataset_list: list[dict[str, Any]]
    active_skill: str | None


def state_schema_fields() -> dict[str, Any]:
    """The TypedDict's annotations (for the registry check)."""
    return dict(TaskExecutionState.__annotations__)
