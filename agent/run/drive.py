"""Driving the graph for one run, turning its stream chunks into `RunEvent`s, and closing the run."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import StreamMode

from agent.errors import RunInterrupted, SessionError
from agent.results import RunEvent, RunResult, result_from_snapshot
from agent.run.options import RunOptions
from agent.run.reading import light_snapshot, result
from agent.run.tokens import TokenStream
from agent.run.unfinished import refuse_unfinished
from agent.session.session import ChatSession
from agent.statuses import RunStatus
from agent.turns import EventRecorder
from graph.context import AgentContext

if TYPE_CHECKING:
    from agent.run.core import RunnerCore

log = logging.getLogger("agentrt.runner")
STREAM_MODES: list[StreamMode] = ["updates", "custom", "checkpoints"]
"""What a run streams; tokens come through `custom` (`agent.run.tokens.TokenStream`), not LangGraph's
`messages` mode, whose handler rescans every node's input (a step would cost more as history grows).
A runner with `stream_messages` (the server's, whose API offers that mode) adds `messages`."""


def drive(
    rt: RunnerCore,
    graph_input: Any,
    config: RunnableConfig,
    session: ChatSession,
    recorder: EventRecorder,
    options: RunOptions | None = None,
) -> Iterator[RunEvent]:
    """Stream the graph to its end or pause (checkpoints synced per step), then close the run: `final` last.

    `options` may set breakpoints (`interrupt_before` / `interrupt_after`): the run then stops there.
    """
    conf = config["configurable"]
    opts = options or RunOptions()
    try:
        rt.builder.attach(session.session_id, recorder)
        # The nodes get this run's LoopRuntime through LangGraph's context (built by init).
        context = AgentContext(rt.builder)
        modes: list[StreamMode] = [*STREAM_MODES, "messages"] if rt.stream_messages else STREAM_MODES
        if not rt.stream_messages:  # the `messages` mode streams tokens itself
            callbacks: list[Any] = list(config.get("callbacks") or [])  # type: ignore[arg-type]
            config = {**config, "callbacks": [*callbacks, TokenStream()]}
        modes = [*modes, *rt.extra_stream_modes]
        subgraphs = rt.stream_subgraphs
        item: Any  # (mode, chunk), or (namespace, mode, chunk) with subgraphs
        for item in rt.graph_for(session.tenant_id).stream(
            graph_input,
            config,
            context=context,
            stream_mode=modes,
            durability="sync",
            subgraphs=subgraphs,
            interrupt_before=opts.interrupt_before,
            interrupt_after=opts.interrupt_after,
        ):
            if subgraphs:
                yield from rt._translate_in(tuple(item[0]), item[1], item[2], recorder)
            else:
                yield from rt._translate_in((), item[0], item[1], recorder)
    except KeyboardInterrupt as err:
        raise interrupted(rt, session, recorder) from err
    except BaseException as err:
        if not isinstance(err, GeneratorExit):
            closed_as_failed(rt, session, recorder, conf["run_id"], err)
        raise
    finally:
        rt.builder.detach(session.session_id)
        _commit_quietly(recorder)
        # The next process opening the session reads the persisted indexes and only the tail.
        save_indexes = getattr(rt.saver, "save_indexes", None)
        if save_indexes is not None:
            save_indexes()
        rt.manager.jsonl.event_log(session.tenant_id, session.session_id).save_index()
    res = _result(rt, session, recorder)
    res.run_id = conf["run_id"]
    finish(rt, session, recorder, res)
    yield RunEvent("final", res.to_json())


def _result(rt: RunnerCore, session: ChatSession, recorder: EventRecorder) -> RunResult:
    """The run's result. A run whose graph finished: the state it streamed with its last checkpoint
    and that checkpoint's tail (no history replayed again). A run that stopped inside a step (an
    approval, an error): the thread's live state, which also has the writes of the step's finished
    tasks and only the interrupts still pending."""
    if recorder.last_values is not None and recorder.last_checkpoint_id is not None:
        thread = rt._thread(session.tenant_id, session.session_id)
        at: RunnableConfig = {"configurable": {**thread["configurable"], "checkpoint_id": recorder.last_checkpoint_id}}
        snap = light_snapshot(rt, at)
        if not snap.next and not snap.tasks:
            return result_from_snapshot(session.session_id, snap._replace(values=recorder.last_values))
    return result(rt, session.session_id, session.tenant_id)


def closed_as_failed(
    rt: RunnerCore, session: ChatSession, recorder: EventRecorder, run_id: str, err: BaseException
) -> None:
    """Record that the run failed with `err` (its `run_fail` entry, the run FAILED), unless that
    fails too: then the run stays open for `agentrt resume` and `err` still reaches the caller.

    A store that failed may also have lost the entries this process wrote since its last commit (a
    PostgreSQL crash drops the commits it had not flushed), so this process's idea of the session
    (its leaf, its runs) may be ahead of the store: nothing more is written from it then.
    """
    try:
        recorder.record("run_fail", {"run_id": run_id, "error": f"{type(err).__name__}: {err}"})
        session.context = without(session.context, "fork_checkpoint_id")
        rt.manager.mark_run(session, run_id, RunStatus.FAILED)
    except Exception as exc:
        sid = session.session_id
        log.warning("run %s of %s stopped unrecorded (%s); `agentrt resume %s` picks it up", run_id, sid, exc, sid)


def interrupted(rt: RunnerCore, session: ChatSession, recorder: EventRecorder) -> RunInterrupted:
    """Ctrl-C stopped the run: close it as INTERRUPTED (resumable; a new turn is accepted when the
    graph has no step pending) and return the error that names the session."""
    started = recorder.last_checkpoint_id is not None
    try:
        payload = {"run_id": recorder.run_id, "interrupted": True, "error": "interrupted (Ctrl-C)"}
        recorder.record("run_fail", payload)
        if started:  # a branch's fork point is kept until a run on it wrote its first checkpoint
            session.context = without(session.context, "fork_checkpoint_id")
        rt.manager.mark_run(session, recorder.run_id, RunStatus.INTERRUPTED)
    except Exception as exc:  # the interrupt itself must still reach the caller
        log.warning("could not record the interrupt of %s: %s", session.session_id, exc)
    return RunInterrupted(session.session_id, started, pending=_pending(rt, session))


def _pending(rt: RunnerCore, session: ChatSession) -> bool:
    """Whether the interrupted run left a step to run (`resume` it) rather than room for a new turn.

    Read from what was written, not from what the stream reported: a checkpoint put by a background
    thread may have landed after the interrupt (e.g. the first one, with `__start__` next).
    """
    try:
        refuse_unfinished(rt, session)
    except SessionError:
        return True
    except Exception as exc:  # unreadable: `resume` is the safe suggestion (it checks before acting)
        log.warning("could not read the state of %s after the interrupt: %s", session.session_id, exc)
        return True
    return False


def translate(mode: str, chunk: Any, recorder: EventRecorder) -> Iterator[RunEvent]:
    """One chunk of `graph.stream` (in `STREAM_MODES`) as RunEvents; interrupts and node ends are recorded."""
    if mode == "updates":
        for node, update in (chunk or {}).items():
            if node == "__interrupt__":
                values = [_request(i) for i in (update or ())]
                for value in values:
                    recorder.record("hitl_request", {"run_id": recorder.run_id, **jsonable_dict(value)})
                yield RunEvent("interrupt", {"requests": values})
                continue
            recorder.node_done(node)
            data: dict[str, Any] = {"node": node}
            if isinstance(update, dict):
                data["keys"] = sorted(update)
                if "task_todo_list" in update:
                    yield RunEvent("todo", {"todos": update["task_todo_list"]})
            yield RunEvent("node", data)
    elif mode == "checkpoints":
        cp_id = chunk["config"]["configurable"]["checkpoint_id"]
        values = chunk.get("values")
        recorder.checkpoint(cp_id, list(chunk.get("next") or []), values if isinstance(values, dict) else None)
    elif mode == "custom":
        payload = dict(chunk) if isinstance(chunk, dict) else {"value": chunk}
        yield RunEvent(str(payload.pop("event", "custom")), payload)
    elif mode == "messages":
        msg, meta = chunk
        if getattr(msg, "type", "") == "AIMessageChunk" and isinstance(msg.content, str) and msg.content:
            yield RunEvent("token", {"text": msg.content, "node": meta.get("langgraph_node")})


def _request(intr: Any) -> Any:
    """An interrupt's request with its id (the approval id `resume --interrupt` names)."""
    value = getattr(intr, "value", intr)
    iid = getattr(intr, "id", None)
    return {**value, "interrupt_id": iid} if isinstance(value, dict) and iid else value


def finish(rt: RunnerCore, session: ChatSession, recorder: EventRecorder, res: RunResult) -> None:
    """Write the run's closing entry (and the answer on the page), the branch head, and the run status."""
    token = recorder.token
    if res.status == RunStatus.COMPLETED:
        # Made durable by run_end's own commit right after it (one fsync for both entries).
        rt.manager.memory.add_assistant_message(session, res.answer, res.run_id, token, defer_commit=True)
        recorder.record("run_end", {"run_id": res.run_id, "finish_reason": res.finish_reason})
    elif res.status == RunStatus.PAUSED:
        recorder.record("run_pause", {"run_id": res.run_id, "reason": "awaiting human approval"})
    elif res.status == RunStatus.INTERRUPTED:  # the graph returned with a step left: it stopped at a breakpoint
        recorder.record("run_pause", {"run_id": res.run_id, "reason": "breakpoint"})
    else:
        recorder.record("run_fail", {"run_id": res.run_id, "finish_reason": res.finish_reason, "error": res.error})
    session.context = without(session.context, "fork_checkpoint_id")
    if rt.settings.datasets and rt.builder.datasets_loaded(session.tenant_id, session.session_id):
        session.dataset_list = [d.name for d in rt.settings.datasets]
        session.datasets_loaded = True
    heads = dict(session.context.get("branch_heads") or {})
    if recorder.last_checkpoint_id:
        heads[session.current_branch_id] = recorder.last_checkpoint_id
    session.context = {**session.context, "branch_heads": heads}
    rt.manager.mark_run(session, res.run_id, res.status)


def _commit_quietly(recorder: EventRecorder) -> None:
    """Make the run's deferred event entries durable however the drive ended (never masks its error)."""
    try:
        recorder.commit()
    except Exception as err:
        log.warning("could not sync the event log of %s: %s", recorder.session.session_id, err)


def without(context: dict[str, Any], key: str) -> dict[str, Any]:
    """`context` minus `key` (a new dict: the session's field is replaced, never mutated)."""
    return {k: v for k, v in context.items() if k != key}


def jsonable_dict(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else `{"value": repr(value)}`."""
    return value if isinstance(value, dict) and isinstance(jsonable(value), dict) else {"value": repr(value)}


def jsonable(value: Any) -> Any:
    """`value` when JSON can encode it, else its repr."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
