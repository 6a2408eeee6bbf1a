"""What runs report: streamed `RunEvent`s, the final `RunResult`, and `jsonable`, their plain JSON form."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import Enum
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.types import Interrupt, StateSnapshot
from pydantic import BaseModel

from agent.core.statuses import FinishReason, RunStatus


@dataclass
class RunEvent:
    """One streamed event.

    kinds: started (first: session and run ids), node, token, model_call, tool_call, tool_result,
    todo, compression, interrupt, recovered (resume only), final (last; `data` is the RunResult as JSON).
    """

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    """What a finished (or stopped) run reports; `status` is COMPLETED, FAILED, PAUSED or INTERRUPTED."""

    session_id: str
    run_id: str
    answer: str
    status: str
    finish_reason: str | None
    iterations: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    todos: list[dict[str, Any]] = field(default_factory=list)
    pending_approval: list[dict[str, Any]] = field(default_factory=list)
    """Requests the run waits for (PAUSED): `name`, `args`, `tool_call_id` and the `interrupt_id` that
    `resume(..., interrupt_id=...)` / `agentrt resume ID --approve --interrupt IID` names."""

    def to_json(self) -> dict[str, Any]:
        """The `--json` object of `agentrt run` / `agentrt resume`."""
        return dict(self.__dict__)


def pending_approvals(snap: StateSnapshot) -> list[dict[str, Any]]:
    """The approvals a stopped run waits for: each request (tool, args, call id) with its `interrupt_id`."""
    return [{**i.value, "interrupt_id": i.id} for i in snap.interrupts if isinstance(getattr(i, "value", None), dict)]


def result_from_snapshot(session_id: str, snap: StateSnapshot) -> RunResult:
    """Summarize a session's latest graph state."""
    values = dict(snap.values or {})
    msgs = values.get("messages") or []
    answer = ""
    if msgs and isinstance(msgs[-1], AIMessage) and not msgs[-1].tool_calls:
        content = msgs[-1].content
        answer = content if isinstance(content, str) else str(content)
    finish = values.get("finish_reason")
    pending = pending_approvals(snap)
    if snap.next or snap.tasks:
        status = RunStatus.PAUSED if snap.interrupts else RunStatus.INTERRUPTED
    elif finish == FinishReason.COMPLETED:
        status = RunStatus.COMPLETED
    elif finish is None:
        status = RunStatus.UNKNOWN
    else:
        status = RunStatus.FAILED
    totals = values.get("token_usage") or {}
    usage_in, usage_out = int(totals.get("input_tokens") or 0), int(totals.get("output_tokens") or 0)
    tools = int(values.get("tool_call_count") or 0)
    return RunResult(
        session_id=session_id,
        run_id=str((snap.metadata or {}).get("run_id") or ""),
        answer=answer,
        status=status,
        finish_reason=finish,
        iterations=int(values.get("iteration_count") or 0),
        model_calls=int(values.get("model_call_count") or 0),
        tool_calls=tools,
        input_tokens=usage_in,
        output_tokens=usage_out,
        error=values.get("error"),
        todos=list(values.get("task_todo_list") or []),
        pending_approval=pending,
    )


_PLAIN = frozenset({str, int, float, bool, type(None)})


def jsonable(value: Any) -> Any:
    """`value` as plain JSON types: how events and graph values leave the process (the server's API,
    the live events of a worker). LangChain messages become their `model_dump()`, interrupts
    `{"value", "id"}`; anything else without a JSON form becomes its `repr`, never a pickle."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is dict:  # the common containers first, their plain items without a call each
        return {k if type(k) is str else str(k): v if type(v) in _PLAIN else jsonable(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _PLAIN else jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, Interrupt):
        return {"value": jsonable(value.value), "id": value.id}
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return repr(value)
