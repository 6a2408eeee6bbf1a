"""TaskExecutionState: the graph-state boundary (seed §2), with its reducers and field registry.

Field groups (seed §2, snake_case):

| group      | fields                                                               | written by            |
|------------|----------------------------------------------------------------------|-----------------------|
| input      | agent_config, llm_model_config, dataset_list, user_input, user_intent| runner / init         |
| plan       | task_plan_text, task_todo_list, current_task                         | planning / acting     |
| loop       | iteration_count, finish_reason, loop_signal, last_iteration_result   | reasoning / refining  |
| protection | consecutive_failures, replan_count, context_compression_count,       | refining / memory /   |
|            | hitl_request, hitl_decision, error                                   | acting                |
| context    | execution_history_text, tool_result_store, messages, runtime_messages| acting / refining ... |
| runtime    | active_skill, sandbox_manifest (path -> blob digest of the room)     | planning / acting     |
| accounting | model_call_count, last_usage, turn                                   | planning / reasoning  |

`execution_history_text`, `tool_result_store` and `messages` append: a node returns only the
increment. The first two are LangGraph `DeltaChannel`s (only appended writes are stored);
`messages` uses `add_messages` (what Studio's chat shows). `runtime_messages` is the model's
context as canonical DTOs (see `checkpointing.messages`), replaced wholesale, so compression can
rewrite it; the saver still stores a pure append as a delta.

The seed's "add in step" rule: a new field must also be added to `FIELD_REGISTRY` (and so to the
codec, recovery validation and the tests); `tests/unit/test_state.py` fails otherwise. Changing
the set of fields or their reducers needs a new `SCHEMA_VERSION`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages

SCHEMA_VERSION = 1

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
    execution_history_text: Annotated[list[str], DeltaChannel(extend_list, snapshot_frequency=50)]
    tool_result_store: Annotated[list[dict[str, Any]], DeltaChannel(extend_list, snapshot_frequency=50)]
    messages: Annotated[list[AnyMessage], add_messages]
    runtime_messages: list[dict[str, Any]]
    # runtime snapshot (what the LoopRuntime is rebuilt with)
    active_skill: str | None
    sandbox_manifest: dict[str, str] | None
    # accounting
    model_call_count: int
    last_usage: dict[str, Any] | None
    turn: int


FieldGroup = Literal["input", "plan", "loop", "protection", "context", "runtime", "accounting"]

# name -> (group, reducer kind). Reducer kinds: "replace", "append" (DeltaChannel extend), "messages".
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
    "runtime_messages": ("context", "replace"),
    "active_skill": ("runtime", "replace"),
    "sandbox_manifest": ("runtime", "replace"),
    "model_call_count": ("accounting", "replace"),
    "last_usage": ("accounting", "replace"),
    "turn": ("accounting", "replace"),
}


class GraphInput(TypedDict, total=False):
    """What a caller may send: `user_input`, or Studio's chat `messages`."""

    user_input: str
    messages: Annotated[list[AnyMessage], add_messages]
    dataset_list: list[dict[str, Any]]
    active_skill: str | None


def state_schema_fields() -> dict[str, Any]:
    """The TypedDict's annotations (for the registry check)."""
    return dict(TaskExecutionState.__annotations__)
