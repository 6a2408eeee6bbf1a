"""Reading a run request: the agent's input text or the human's answer to an interrupt, and the job to run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from agent.errors import ConfigError
from agent.results import RunEvent
from agent.serve.auth import Principal
from agent.serve.context import ASSISTANT_ID, ServeContext
from agent.serve.engine import RunRecord
from agent.serve.streams import SUPPORTED_MODES, normalize_modes
from agent.serve.workers import worker_job
from graph.state import normalize_decision

UNSUPPORTED = ("interrupt_before", "interrupt_after", "checkpoint", "checkpoint_id", "after_seconds", "webhook")


def input_text(value: Any) -> str | None:
    """The turn's text from `{"user_input": ...}`, `{"messages": [...]}` (last human message) or a string."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if value.get("user_input") is not None:
            return str(value["user_input"])
        for msg in reversed(list(value.get("messages") or [])):
            if isinstance(msg, str):
                return msg
            if isinstance(msg, dict) and msg.get("role", msg.get("type")) in ("user", "human"):
                return _content_text(msg.get("content"))
        if not value:
            return None
    raise ConfigError('run input must be {"user_input": "..."} or {"messages": [{"role": "user", "content": "..."}]}')


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


def resume_decision(command: dict[str, Any] | None) -> dict[str, Any] | None:
    """`command={"resume": ...}` as agentrt's approval decision (`{"approved", "reason"}`)."""
    if not command:
        return None
    extra = sorted(k for k in command if k != "resume" and command[k] not in (None, (), [], {}))
    if extra:
        raise ConfigError(
            f"command {', '.join(extra)} is not supported by agentrt serve; send command={{'resume': ...}}"
        )
    value = command.get("resume")
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key not in ("approved", "approve", "reason"):
            value = inner  # {interrupt_id: answer}, as LangGraph accepts it
    return normalize_decision(value)


def resume_interrupt_id(command: dict[str, Any] | None) -> str | None:
    """The interrupt id of `command={"resume": {interrupt_id: answer}}` (None for a bare answer)."""
    value = (command or {}).get("resume")
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        if key not in ("approved", "approve", "reason"):
            return str(key)
    return None


def check_request(body: dict[str, Any]) -> None:
    """Refuse (ConfigError, a 422) what agentrt cannot run: an unsupported option, an input or a
    command it cannot read. Called before anything is created."""
    for key in UNSUPPORTED:
        if body.get(key):
            raise ConfigError(f"{key} is not supported by agentrt serve; leave it out")
    if resume_decision(body.get("command")) is None:
        input_text(body.get("input"))


def make_record(body: dict[str, Any], thread_id: str, principal: Principal, streaming: bool = True) -> RunRecord:
    """The run's record (not started yet) from the request body. A run started without a stream
    (create, wait) streams every mode to whoever joins it, unless it names its modes."""
    check_request(body)
    given = body.get("stream_mode")
    modes = normalize_modes(given) if given is not None or streaming else SUPPORTED_MODES
    return RunRecord(
        thread_id=thread_id,
        tenant_id=principal.tenant_id,
        assistant_id=ASSISTANT_ID,
        metadata=dict(body.get("metadata") or {}),
        kwargs={"stream_mode": sorted(modes), "input": body.get("input"), "command": body.get("command")},
        modes=modes,
        subgraphs=bool(body.get("stream_subgraphs")),
    )


def make_job(
    ctx: ServeContext, principal: Principal, thread_id: str, body: dict[str, Any], rec: RunRecord
) -> Callable[[], Iterator[RunEvent]]:
    """A new turn (input), or the continuation of the thread's unfinished run (command, or no input):
    in this process, or on the Celery workers when `serve.runs_on` says so."""
    runner = ctx.runner
    decision = resume_decision(body.get("command"))
    text = None if decision is not None else input_text(body.get("input"))
    if ctx.on_workers:
        return worker_job(
            ctx.settings, principal.tenant_id, principal.user_id, thread_id, text, decision, rec.cancel_requested.is_set
        )
    if text is not None:
        return lambda: runner.stream(
            text, session_id=thread_id, tenant_id=principal.tenant_id, user_id=principal.user_id
        )
    iid = resume_interrupt_id(body.get("command")) if decision is not None else None
    return lambda: runner.stream_resume(
        thread_id, principal.tenant_id, principal.user_id, decision=decision, interrupt_id=iid
    )
