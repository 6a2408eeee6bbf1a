"""Reading a run request: the agent's input text or the human's answer to an interrupt, and the job to run."""

from __future__ import annotations

import time
from typing import Any

from agent.errors import ConfigError
from agent.run.options import RunOptions
from agent.run.overrides import check_overrides
from agent.serve.auth import Principal
from agent.serve.run_record import Job, RunRecord, Strategy
from agent.serve.serve_context import ASSISTANT_ID, ServeContext
from agent.serve.streams import SUPPORTED_MODES, normalize_modes
from agent.serve.workers import worker_job
from graph.state import normalize_decision

UNSUPPORTED = ("checkpoint", "checkpoint_id", "webhook")
KWARGS = ("input", "command", "interrupt_before", "interrupt_after", "after_seconds", "on_completion")
"""The request fields a Run shows in its `kwargs`."""


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


OVERRIDES = "_overrides"
"""The body key `with_assistant` puts the run's overrides under (not a field a client can send)."""


def with_assistant(ctx: ServeContext, principal: Principal, body: dict[str, Any]) -> dict[str, Any]:
    """The body with the assistant it names resolved: its id, and the overrides the run applies (the
    assistant's, then the run's own `config.configurable` / `context`, both from the allowlist of
    agent/run/overrides.py). 404 for an assistant the caller's tenant lacks, 422 naming a key."""
    assistant_id, overrides = ctx.run_assistant(principal, str(body.get("assistant_id") or ""))
    configurable = (body.get("config") or {}).get("configurable") or {}
    if not isinstance(configurable, dict):
        raise ConfigError("config.configurable: must be an object")
    for where, given in (("config.configurable", configurable), ("context", body.get("context") or {})):
        if given:
            check_overrides(ctx.settings, given, where)
            overrides = {**overrides, **ctx.assistants.resolved(given)}
    return {**body, "assistant_id": assistant_id, OVERRIDES: overrides}


def check_request(body: dict[str, Any], ctx: ServeContext, stateless: bool = False) -> None:
    """Refuse (ConfigError, a 422 naming the field) what agentrt cannot run: an unsupported option, an
    input or a command it cannot read, breakpoints at nodes the graph lacks, an option the workers
    do not offer. Called before anything is created."""
    for key in UNSUPPORTED:
        if body.get(key):
            raise ConfigError(f"{key} is not supported by agentrt serve; leave it out")
    if resume_decision(body.get("command")) is None:
        input_text(body.get("input"))
    elif stateless:
        raise ConfigError("command: a stateless run has no interrupted thread to resume; send it to the thread")
    nodes = set(ctx.runner.graph.nodes) - {"__start__"}
    for key in ("interrupt_before", "interrupt_after"):
        asked = body.get(key)
        unknown = sorted(set(asked) - nodes) if isinstance(asked, list) else []
        if unknown:
            known = ", ".join(sorted(nodes))
            raise ConfigError(f"{key}: no node {', '.join(unknown)} in the graph; its nodes are {known}")
    if ctx.on_workers:
        _check_on_workers(body)


def _check_on_workers(body: dict[str, Any]) -> None:
    if body.get(OVERRIDES):
        raise ConfigError(
            "assistant_id: an assistant's settings are not offered on the workers (serve.runs_on: workers); "
            "run the built-in assistant, agentrt"
        )
    for key in ("interrupt_before", "interrupt_after"):
        if body.get(key):
            raise ConfigError(f"{key} is not offered on the workers (serve.runs_on: workers); leave it out")
    strategy = body.get("multitask_strategy")
    if strategy == Strategy.ROLLBACK or (strategy == Strategy.INTERRUPT and body.get("input") is not None):
        raise ConfigError(
            f"multitask_strategy {strategy} is not offered on the workers (serve.runs_on: workers) for a run "
            "with input; send reject or enqueue"
        )


def make_record(body: dict[str, Any], thread_id: str, principal: Principal, streaming: bool = True) -> RunRecord:
    """The run's record (not started yet) from the request body. A run started without a stream
    (create, wait) streams every mode to whoever joins it, unless it names its modes."""
    given = body.get("stream_mode")
    modes = normalize_modes(given) if given is not None or streaming else SUPPORTED_MODES
    text = None if resume_decision(body.get("command")) is not None else input_text(body.get("input"))
    after = float(body.get("after_seconds") or 0)
    kwargs = {key: body.get(key) for key in KWARGS}
    return RunRecord(
        thread_id=thread_id,
        tenant_id=principal.tenant_id,
        assistant_id=str(body.get("assistant_id") or ASSISTANT_ID),  # the page's runs: the built-in one
        metadata=dict(body.get("metadata") or {}),
        kwargs={**kwargs, "stream_mode": sorted(modes)},
        modes=modes,
        subgraphs=bool(body.get("stream_subgraphs")),
        due=time.time() + after,
        has_input=text is not None,
    )


def strategy_of(body: dict[str, Any]) -> Strategy:
    """The run's `multitask_strategy` (LangGraph's default: enqueue)."""
    return Strategy(body.get("multitask_strategy") or Strategy.ENQUEUE)


def make_job(ctx: ServeContext, principal: Principal, thread_id: str, body: dict[str, Any], rec: RunRecord) -> Job:
    """A new turn (input), or the continuation of the thread's unfinished run (command, or no input):
    in this process, or on the Celery workers when `serve.runs_on` says so. A turn of a run that
    interrupted another may discard that run's unfinished step (read when the run starts)."""
    runner = ctx.runner
    decision = resume_decision(body.get("command"))
    text = None if decision is not None else input_text(body.get("input"))
    if ctx.on_workers:
        return worker_job(
            ctx.settings, principal.tenant_id, principal.user_id, thread_id, text, decision, rec.cancel_requested.is_set
        )
    before, after = body.get("interrupt_before"), body.get("interrupt_after")
    if text is not None:
        return lambda: runner.stream(
            text,
            session_id=thread_id,
            tenant_id=principal.tenant_id,
            user_id=principal.user_id,
            options=RunOptions(before, after, discard_unfinished=rec.supersedes, overrides=body.get(OVERRIDES)),
        )
    iid = resume_interrupt_id(body.get("command")) if decision is not None else None
    return lambda: runner.stream_resume(
        thread_id,
        principal.tenant_id,
        principal.user_id,
        decision=decision,
        interrupt_id=iid,
        # No settings of its own: the run continues under those it started with (its checkpoint has them).
        options=RunOptions(before, after, overrides=body.get(OVERRIDES) or None),
    )
