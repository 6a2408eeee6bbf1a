"""Reading a run request: the agent's input text or the human's answer to an interrupt, and the job to run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from agent.core.errors import ConfigError
from agent.core.results import RunEvent
from agent.runner.options import RunOptions
from agent.runner.overrides import check_overrides
from agent.serve.auth import Principal
from agent.serve.run_record import CancelAction, Job, RunRecord, Strategy, new_run_id
from agent.serve.serve_context import ASSISTANT_ID, ServeContext
from agent.serve.state_edit import fork_for_run, run_fork_point
from agent.serve.streams import SUPPORTED_MODES, normalize_modes
from agent.serve.workers import worker_job
from graph.state import normalize_decision

UNSUPPORTED = ("webhook",)
FORK_AT = "_fork_at"
"""The body key `start_point` puts the checkpoint a run forks at under (not a field a client can send)."""
FROM_FORK = "_from_fork"
"""The body key of a run without input that continues a just-forked branch from its fork point (set
by `start_point`, or by `state.fork`; not a field a client can send)."""
KWARGS = ("input", "command", "interrupt_before", "interrupt_after", "after_seconds", "on_completion")
"""The request fields a Run shows in its `kwargs`."""
RESUMING, RESUME_MAP = "__pregel_resuming", "__pregel_resume_map"
"""What a parent graph's RemoteGraph node puts in `config.configurable` when the parent resumes."""


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


LANGGRAPH_KEYS = frozenset(
    ("thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "run_id", "assistant_id", "graph_id", "user_id")
)
"""Keys of a run's `config.configurable` that LangGraph's clients send for LangGraph itself (ids, and
its `__pregel_*` / `langgraph_*` keys, e.g. from a `RemoteGraph` node): not settings, so neither
applied nor refused by the assistants' allowlist."""


def is_langgraph_key(key: str) -> bool:
    """Whether `key` of a run's configurable is LangGraph's own (see LANGGRAPH_KEYS)."""
    return key in LANGGRAPH_KEYS or key.startswith(("__", "langgraph_"))


def with_assistant(ctx: ServeContext, principal: Principal, body: dict[str, Any]) -> dict[str, Any]:
    """The body with the assistant it names resolved: its id, and the overrides the run applies (the
    assistant's, then the run's own `config.configurable` / `context`, both from the allowlist of
    agent/runner/overrides.py). 404 for an assistant the caller's tenant lacks, 422 naming a key."""
    assistant_id, overrides = ctx.run_assistant(principal, str(body.get("assistant_id") or ""))
    configurable = (body.get("config") or {}).get("configurable") or {}
    if not isinstance(configurable, dict):
        raise ConfigError("config.configurable: must be an object")
    own = {k: v for k, v in configurable.items() if not is_langgraph_key(k)}
    for where, given in (("config.configurable", own), ("context", body.get("context") or {})):
        if given:
            check_overrides(ctx.settings, given, where)
            overrides = {**overrides, **ctx.assistants.resolved(given)}
    return {**body, "assistant_id": assistant_id, OVERRIDES: overrides}


def remote_resume(ctx: ServeContext, principal: Principal, thread_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """The request as agentrt runs it when a parent graph's `RemoteGraph` node resumes.

    Resumed with `Command(resume=...)`, a parent graph runs its interrupted RemoteGraph node again:
    the node sends the parent's input again, with `config.configurable.__pregel_resuming` set and,
    when the parent was resumed with `{interrupt_id: answer}`, `__pregel_resume_map` holding it.
    LangGraph's graph then ignores the input and continues its checkpoint with the answer meant for
    its interrupt. So does agentrt, only on a thread whose run waits (status `interrupted`, or
    `busy`: the parent saw the interrupt while the run was still closing, and this run queues
    behind it) and for a request without a `command`: the input is dropped and the map becomes the
    command. Without a map naming one interrupt (the parent resumed with a bare value, which never
    reaches the node: LangGraph's graph asks again) the request is refused, naming the interrupt
    id to resume with. Any other request is left as it came: input on a waiting thread is still
    refused.
    """
    conf = (body.get("config") or {}).get("configurable") or {}
    if not conf.get(RESUMING) or body.get("command"):
        return body
    session = ctx.session(principal, thread_id)
    if ctx.thread_status(session) not in ("interrupted", "busy"):
        return body
    answers = conf.get(RESUME_MAP)
    if isinstance(answers, dict) and len(answers) > 1:  # the parent answered several interrupts: this one's
        pending = {i.id for i in ctx.snapshot(session).interrupts}
        answers = {k: v for k, v in answers.items() if k in pending}
    if not isinstance(answers, dict) or len(answers) != 1:
        waiting = ", ".join(i.id for i in ctx.snapshot(session).interrupts) or "INTERRUPT_ID"
        raise ConfigError(
            f"thread {thread_id} waits for an answer to interrupt {waiting}: resume the parent graph with "
            f"Command(resume={{{waiting!r}: answer}}) (a bare resume value does not reach a RemoteGraph node)"
        )
    command = {"resume": answers}
    resume_decision(command)  # an answer agentrt cannot read: 422 before the run starts
    return {**body, "input": None, "command": command}


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
    if stateless and asked_checkpoint(body):
        raise ConfigError("checkpoint: a stateless run has no checkpoint to start from; send it to the thread")
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


def asked_checkpoint(body: dict[str, Any]) -> str | None:
    """The checkpoint a run asks to start from (`checkpoint.checkpoint_id`, else `checkpoint_id`)."""
    given = body.get("checkpoint") or {}
    return str(given.get("checkpoint_id") or body.get("checkpoint_id") or "") or None


def start_point(ctx: ServeContext, principal: Principal, thread_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """The body with the checkpoint the run forks at (a run from an earlier checkpoint: see
    agent/serve/state_edit.py); 404 for a checkpoint the thread lacks, 422 for a resume from one."""
    asked = asked_checkpoint(body)
    if asked is None:
        return body
    at = run_fork_point(ctx, ctx.session(principal, thread_id), asked)
    if at is None:
        return body
    if resume_decision(body.get("command")) is not None:
        raise ConfigError("checkpoint: a resume answers the thread's head; leave checkpoint out")
    return {**body, FORK_AT: at, FROM_FORK: input_text(body.get("input")) is None}


def make_record(
    body: dict[str, Any], thread_id: str, principal: Principal, streaming: bool = True, run_id: str | None = None
) -> RunRecord:
    """The run's record (not started yet) from the request body, with id `run_id` (default: a new
    one). A run started without a stream (create, wait) streams every mode to whoever joins it,
    unless it names its modes."""
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
        run_id=run_id or new_run_id(),
    )


def strategy_of(body: dict[str, Any]) -> Strategy:
    """The run's `multitask_strategy` (LangGraph's default: enqueue)."""
    return Strategy(body.get("multitask_strategy") or Strategy.ENQUEUE)


def make_job(ctx: ServeContext, principal: Principal, thread_id: str, body: dict[str, Any], rec: RunRecord) -> Job:
    """A new turn (input), or the continuation of the thread's unfinished run (command, or no input):
    in this process, or on the Celery workers when `serve.runs_on` says so. A turn of a run that
    interrupted another may discard that run's unfinished step (read when the run starts)."""
    decision = resume_decision(body.get("command"))
    text = None if decision is not None else input_text(body.get("input"))
    job = _job(ctx, principal, thread_id, body, rec, decision, text)
    fork_at = body.get(FORK_AT)
    if fork_at is None:
        return job

    def forked() -> Iterator[RunEvent]:  # forked when the run starts: the run before it has let go
        fork_for_run(ctx, principal.tenant_id, thread_id, str(fork_at))
        return job()

    return forked


def _job(
    ctx: ServeContext,
    principal: Principal,
    thread_id: str,
    body: dict[str, Any],
    rec: RunRecord,
    decision: dict[str, Any] | None,
    text: str | None,
) -> Job:
    runner = ctx.runner
    before, after = body.get("interrupt_before"), body.get("interrupt_after")
    if ctx.on_workers:

        def options() -> dict[str, Any] | None:  # read when the run starts, as in-process
            asked = {
                "before": before,
                "after": after,
                "discard_unfinished": rec.supersedes,
                "from_fork_point": bool(body.get(FROM_FORK)),
            }
            return {k: v for k, v in asked.items() if v} or None

        return worker_job(
            ctx.settings,
            principal.tenant_id,
            principal.user_id,
            thread_id,
            text,
            decision,
            rec.cancel_requested.is_set,
            options,
            lambda: rec.stop_clean,
            lambda: rec.cancel_action is CancelAction.ROLLBACK,
            lambda tell: setattr(rec, "relay_cancel", tell),
        )
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
        options=RunOptions(
            before, after, overrides=body.get(OVERRIDES) or None, from_fork_point=bool(body.get(FROM_FORK))
        ),
    )
