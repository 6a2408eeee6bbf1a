"""The commands of the thread-stream protocol (`POST /threads/{id}/commands`, and the same frames
on the thread's WebSocket), as LangGraph's protocol (`@langchain/protocol`) defines them:

- `run.start` (`assistant_id`, `input`, `config`, `metadata`): a run as `runs.create` starts it, on
  the thread made on first use; with `config.configurable.checkpoint_id` (the JS SDK's `forkFrom`)
  it is a `state.fork` from that checkpoint. `{"run_id"}`.
- `input.respond` (`interrupt_id`, `response`): the answer to the pending approval. `{"run_id"}`.
- `input.inject` (`namespace`, `message: {role, content}`): a user message as the thread's next
  turn, queued behind a run in flight (agentrt's graph reads input between turns, not inside one).
  `{"run_id"}`.
- `state.get` (`keys`): the thread's values (those keys only, when given) and checkpoint.
- `state.listCheckpoints` (`limit`, `before`): the current branch's checkpoints, newest first:
  `{"checkpoints": [{"id", "timestamp", "step", "node_name", "metadata"}]}`.
- `state.fork` (`checkpoint_id`, `input`, `config`): a new branch of the session's entry tree at that
  checkpoint of the current branch, made current (the branch it came from stays as it was), and a
  run on it: a new turn with `input`, or without it, as LangGraph does, the run goes on from the
  checkpoint (the nodes it still has next run again; none: the run ends at once, the thread's state
  that checkpoint's). `{"run_id", "thread_id"}`.
- `agent.getTree` (`run_id`): the thread's agent tree, one root (agentrt's graph has no subgraphs)
  with the status of that run, else of the thread's newest: `{"tree": {"namespace": [], "status",
  "graph_name"}}`.

A refused command starts nothing: a `ConfigError` (422) names the field, a missing thread or
checkpoint is a 404, a thread with a run in flight (for a fork) a 409.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError, SessionError, SessionNotFound
from agent.serve.assistants import ASSISTANT_ID, GRAPH_ID
from agent.serve.auth import Principal
from agent.serve.bodies import Body
from agent.serve.run_requests import FROM_FORK, check_request, with_assistant
from agent.serve.run_service import listed_run, runs_of, start
from agent.serve.serve_context import ServeContext
from agent.serve.state_edit import fork_at
from agent.serve.stream_bodies import (
    CheckpointListParams,
    ForkParams,
    InjectParams,
    InputRespondParams,
    RunStartParams,
    StateGetParams,
    TreeParams,
)
from agent.serve.thread_follow import announce_state

RUN_MODES = ["values", "updates", "messages-tuple", "custom", "tasks", "checkpoints"]
"""What a run started by the protocol streams (what its events are made from)."""
ROOT_ONLY = "params.namespace: agentrt's graph has no subgraphs; send [] (the root)"
_LIFECYCLE = {"pending": "running", "running": "running", "success": "completed"}


def _params(model: type[Body], params: dict[str, Any]) -> dict[str, Any]:
    try:
        return model.model_validate(params).given()
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in ("params", *first["loc"]))
        raise ConfigError(f"{where}: {first['msg']}") from None


def _fork_point(config: dict[str, Any] | None) -> str | None:
    configurable = (config or {}).get("configurable") or {}
    cp = configurable.get("checkpoint_id") if isinstance(configurable, dict) else None
    if cp is not None and (not isinstance(cp, str) or not cp.strip()):
        raise ConfigError("params.config.configurable.checkpoint_id: must be a checkpoint id")
    return cp


async def run_start(ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """`run.start`: a run as `runs.create` starts it, on the thread made on first use (a fork when
    the config names a checkpoint); `{"run_id"}`."""
    given = _params(RunStartParams, params)
    cp = _fork_point(given.get("config"))
    if cp is not None:
        fork = {k: given[k] for k in ("assistant_id", "input", "config", "metadata") if given.get(k) is not None}
        forked = await state_fork(ctx, principal, thread_id, {**fork, "checkpoint_id": cp})
        return {"run_id": forked["run_id"]}
    if given.get("input") is None:  # a continuation: of a thread that is there
        try:
            await run_in_threadpool(ctx.session, principal, thread_id)
        except SessionNotFound:
            raise ConfigError("params.input: a new thread's first run needs input") from None
    body = {k: given[k] for k in ("assistant_id", "input", "config", "metadata") if given.get(k) is not None}
    rec = await start(ctx, principal, thread_id, {**body, "if_not_exists": "create", "stream_mode": RUN_MODES})
    return {"run_id": rec.run_id}


async def input_respond(
    ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]
) -> dict[str, Any]:
    """`input.respond`: the answer to the pending approval, as a run of its own; `{"run_id"}`."""
    given = _params(InputRespondParams, params)
    answers = given.get("responses") or ([given] if given.get("interrupt_id") else [])
    if len(answers) != 1 or not answers[0].get("interrupt_id"):
        raise ConfigError("params: send one answer: interrupt_id and response (agentrt asks one approval at a time)")
    (answer,) = answers
    resume = {str(answer["interrupt_id"]): answer.get("response")}
    body = {"assistant_id": ASSISTANT_ID, "command": {"resume": resume}, "stream_mode": RUN_MODES}
    if given.get("metadata"):
        body["metadata"] = given["metadata"]
    rec = await start(ctx, principal, thread_id, body)
    return {"run_id": rec.run_id}


async def input_inject(
    ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]
) -> dict[str, Any]:
    """`input.inject`: a user message as the thread's next turn, queued behind a run in flight;
    `{"run_id"}`."""
    given = _params(InjectParams, params)
    if given["namespace"]:
        raise ConfigError(ROOT_ONLY)
    message = given["message"]
    if message["role"] != "user":
        raise ConfigError("params.message.role: agentrt takes a user's message as input; send role user")
    session = await run_in_threadpool(ctx.session, principal, thread_id)  # 404: a thread that is there
    waiting = await run_in_threadpool(lambda: [i.id for i in ctx.snapshot(session).interrupts])
    if waiting and not ctx.engine.busy(session.tenant_id, session.session_id):
        raise SessionError(
            f"thread {thread_id} waits for an answer to interrupt {waiting[0]}: send input.respond with that "
            "interrupt_id, then inject"
        )
    turn = {"role": "user", "content": message["content"]}
    body = {
        "assistant_id": ASSISTANT_ID,
        "input": {"messages": [turn]},
        "multitask_strategy": "enqueue",
        "stream_mode": RUN_MODES,
    }
    rec = await start(ctx, principal, thread_id, body)
    return {"run_id": rec.run_id}


def state_get(ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """`state.get`: the thread's values (only `keys` when given) and checkpoint."""
    given = _params(StateGetParams, params)
    if given.get("namespace"):
        raise ConfigError(ROOT_ONLY)
    state = ctx.state(ctx.session(principal, thread_id))
    values = state["values"]
    if given.get("keys") is not None:
        values = {k: v for k, v in values.items() if k in given["keys"]}
    return {"values": values, "checkpoint": state.get("checkpoint")}


def list_checkpoints(ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """`state.listCheckpoints`: the current branch's checkpoints, newest first (`before`: older than
    that checkpoint); each with the node that wrote it when one did."""
    given = _params(CheckpointListParams, params)
    if given.get("namespace"):
        raise ConfigError(ROOT_ONLY)
    session = ctx.session(principal, thread_id)
    limit = int(given.get("limit") or 10)
    before = given.get("before")
    if before is not None:
        ctx.state(session, before)  # 404 for a checkpoint the thread does not have
    states = ctx.history(session, limit + 1, before)  # one more: the parent of the last says its node
    out = []
    for n, state in enumerate(states[:limit]):
        meta = dict(state.get("metadata") or {})
        parent = states[n + 1] if n + 1 < len(states) else None
        entry = {
            "id": state["checkpoint"]["checkpoint_id"],
            "timestamp": state["created_at"],
            "step": meta.get("step", -1),
            "metadata": meta,
        }
        ran = list((parent or {}).get("next") or [])
        if meta.get("source") == "loop" and len(ran) == 1:
            entry["node_name"] = ran[0]
        out.append(entry)
    return {"checkpoints": out}


async def state_fork(ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """`state.fork`: a new branch at the checkpoint, made current, and a run on it (a new turn with
    `input`, else going on from the checkpoint); `{"run_id", "thread_id"}`."""
    given = _params(ForkParams, params)
    session = await run_in_threadpool(ctx.session, principal, thread_id)
    config = dict(given.get("config") or {})
    configurable = {k: v for k, v in (config.get("configurable") or {}).items() if k != "checkpoint_id"}
    body: dict[str, Any] = {"assistant_id": given.get("assistant_id") or ASSISTANT_ID, "stream_mode": RUN_MODES}
    if configurable:
        body["config"] = {**config, "configurable": configurable}
    for key in ("input", "metadata"):
        if given.get(key) is not None:
            body[key] = given[key]
    if given.get("input") is None:  # as LangGraph: the run goes on from the checkpoint
        body[FROM_FORK] = True
    check_request(await run_in_threadpool(with_assistant, ctx, principal, body), ctx)  # before the fork
    await run_in_threadpool(fork_at, ctx, session, given["checkpoint_id"])
    await run_in_threadpool(announce_state, ctx, principal, thread_id)
    rec = await start(ctx, principal, thread_id, body)
    return {"run_id": rec.run_id, "thread_id": thread_id}


def agent_tree(ctx: ServeContext, principal: Principal, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """`agent.getTree`: the root of the thread's agent tree with the status of `run_id`, else of the
    thread's newest run (`started` before any)."""
    given = _params(TreeParams, params)
    session = ctx.session(principal, thread_id)
    runs = runs_of(ctx, principal.tenant_id, thread_id)
    run_id = given.get("run_id")
    run = listed_run(ctx, principal, thread_id, run_id) if run_id else (runs[0] if runs else None)
    if run is None:
        status = "started"
    else:
        status = _LIFECYCLE.get(str(run["status"]), "failed")
        newest = bool(runs) and runs[0]["run_id"] == run["run_id"]
        if status == "completed" and newest and ctx.thread_status(session) == "interrupted":
            status = "interrupted"  # the run ended at an approval the thread still waits for
    return {"tree": {"namespace": [], "status": status, "graph_name": GRAPH_ID}}


async def execute(
    ctx: ServeContext, principal: Principal, thread_id: str, method: str, params: dict[str, Any]
) -> dict[str, Any] | None:
    """The result of command `method` (None: not one of these commands)."""
    if method == "run.start":
        return await run_start(ctx, principal, thread_id, params)
    if method == "input.respond":
        return await input_respond(ctx, principal, thread_id, params)
    if method == "input.inject":
        return await input_inject(ctx, principal, thread_id, params)
    if method == "state.fork":
        return await state_fork(ctx, principal, thread_id, params)
    if method == "state.get":
        return await run_in_threadpool(state_get, ctx, principal, thread_id, params)
    if method == "state.listCheckpoints":
        return await run_in_threadpool(list_checkpoints, ctx, principal, thread_id, params)
    if method == "agent.getTree":
        return await run_in_threadpool(agent_tree, ctx, principal, thread_id, params)
    return None


COMMANDS = (
    "run.start",
    "input.respond",
    "input.inject",
    "state.get",
    "state.listCheckpoints",
    "state.fork",
    "agent.getTree",
)
