"""Turn: one run of the graph for a session, which owns its lease, its recorder and its stream.

    with Turn(runner, tenant, session_id) as turn:        # the session lease, fenced, heartbeat running
        session = ...                                     # read (or created) under the lease
        turn.open(session, run_id, overrides)             # the recorder: the run's entries, with the token
        yield from turn.stream(graph_input, **head)       # the graph to its end or pause; `final` last

`stream` drives the graph (checkpoints synced per step), hands each chunk to the runner's chunk sink
when it has one, turns the graph's own chunks into the run's events (`agent.runner.chunks.translate`)
and closes the run: its closing entry, the branch head and the run status. A run that fails is
closed FAILED (`failed`), one stopped by Ctrl-C INTERRUPTED (`interrupted`), both resumable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import StreamMode

from agent.core.errors import RunInterrupted, SessionError
from agent.core.results import RunEvent, RunResult, result_from_snapshot
from agent.core.statuses import RunStatus
from agent.runner.chunks import QUIET_MODES, STREAM_MODES, translate
from agent.runner.options import RunOptions
from agent.runner.reading import light_snapshot, result
from agent.runner.tokens import TokenStream
from agent.runner.turns import EventRecorder, SessionHold
from agent.runner.unfinished import refuse_unfinished
from agent.session.session import ChatSession
from graph.context import AgentContext

if TYPE_CHECKING:
    from agent.runner.base_runner import Runner

log = logging.getLogger("agentrt.runner")


class Turn:
    """One run of a session's graph: the lease (`SessionHold`), the recorder (`EventRecorder`), the stream."""

    session: ChatSession
    """The session the run belongs to, as read under the lease (set by `open`)."""
    recorder: EventRecorder
    """Appends the run's entries to the session's event log, with the lease's fencing token (set by `open`)."""

    def __init__(self, runner: Runner, tenant_id: str, session_id: str) -> None:
        self.runner = runner
        self.hold = SessionHold(runner.settings, runner.lease, tenant_id, session_id)
        self.overrides: Mapping[str, Any] | None = None
        """The settings overrides the run streams under (`agent.runner.overrides`; None: the runner's
        settings). Set by `open`; a resume sets those the run's checkpoint recorded once it read them."""

    def __enter__(self) -> Turn:
        self.hold.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.hold.__exit__(exc_type, exc, tb)

    @property
    def token(self) -> int | None:
        """The fencing token every write of this run carries."""
        return self.hold.token

    def open(self, session: ChatSession, run_id: str, overrides: Mapping[str, Any] | None = None) -> EventRecorder:
        """Start recording run `run_id` of `session` (read under the lease), to stream under the
        settings `overrides` make; returns the recorder."""
        self.session = session
        self.overrides = overrides
        self.recorder = EventRecorder(self.runner.manager, session, self.token, run_id)
        return self.recorder

    def config(self, **extra: Any) -> RunnableConfig:
        """The LangGraph config of this run (`extra`: where on the branch it continues), with its overrides."""
        return self.runner.run_config(self.session, self.recorder.run_id, self.token, self.overrides, **extra)

    def stream(self, graph_input: Any, options: RunOptions | None = None, **extra: Any) -> Iterator[RunEvent]:
        """Stream the graph to its end or pause (checkpoints synced per step), then close the run: `final` last.

        `extra`: the run config's additions (the branch head). `options` may set breakpoints
        (`interrupt_before` / `interrupt_after`): the run then stops there.
        """
        rt, session, recorder = self.runner, self.session, self.recorder
        opts = options or RunOptions()
        sink = rt.chunks
        wanted: tuple[StreamMode, ...] = sink.modes if sink is not None else ()
        subgraphs = sink is not None and sink.subgraphs
        try:
            config = self.config(**extra)  # inside: a run whose settings cannot apply is closed FAILED
            rt.builder.attach(session.session_id, recorder)
            # The nodes get this run's LoopRuntime through LangGraph's context (built by init).
            context = AgentContext(rt.builder)
            if opts.live_events and "messages" not in wanted:  # the `messages` mode streams tokens itself
                # Tokens are live events only: a caller taking just the result gets the model's
                # reply in one piece, with no per-token chunks made and merged.
                config = {**config, "callbacks": [TokenStream()]}
            item: Any  # (mode, chunk), or (namespace, mode, chunk) with subgraphs
            for item in rt.graph_for(session.tenant_id).stream(
                graph_input,
                config,
                context=context,
                stream_mode=[*(STREAM_MODES if opts.live_events else QUIET_MODES), *wanted],
                durability="sync",
                subgraphs=subgraphs,
                interrupt_before=opts.interrupt_before,
                interrupt_after=opts.interrupt_after,
            ):
                ns, mode, chunk = (tuple(item[0]), item[1], item[2]) if subgraphs else ((), item[0], item[1])
                if sink is not None:
                    yield from sink(ns, mode, chunk)
                if not ns:  # only the graph's own chunks are the run's events
                    yield from translate(mode, chunk, recorder)
        except KeyboardInterrupt as err:
            raise self.interrupted() from err
        except BaseException as err:
            if not isinstance(err, GeneratorExit):
                self.failed(err)
            raise
        finally:
            rt.builder.detach(session.session_id)
            self._commit_quietly()
            # The next process opening the session reads the persisted indexes and only the tail.
            save_indexes = getattr(rt.saver, "save_indexes", None)
            if save_indexes is not None:
                save_indexes()
            rt.manager.event_log(session.tenant_id, session.session_id).save_index()
        res = self._result()
        res.run_id = recorder.run_id
        self._finish(res)
        yield RunEvent("final", res.to_json())

    def failed(self, err: BaseException) -> None:
        """Record that the run failed with `err` (its `run_fail` entry, the run FAILED), unless that
        fails too: then the run stays open for `agentrt resume` and `err` still reaches the caller.

        A store that failed may also have lost the entries this process wrote since its last commit (a
        PostgreSQL crash drops the commits it had not flushed), so this process's idea of the session
        (its leaf, its runs) may be ahead of the store: nothing more is written from it then.
        """
        run_id, session = self.recorder.run_id, self.session
        try:
            self.recorder.record("run_fail", {"run_id": run_id, "error": f"{type(err).__name__}: {err}"})
            session.context = without(session.context, "fork_checkpoint_id")
            self.runner.manager.mark_run(session, run_id, RunStatus.FAILED)
        except Exception as exc:
            sid = session.session_id
            log.warning("run %s of %s stopped unrecorded (%s); `agentrt resume %s` picks it up", run_id, sid, exc, sid)

    def interrupted(self) -> RunInterrupted:
        """Ctrl-C stopped the run: close it as INTERRUPTED (resumable; a new turn is accepted when the
        graph has no step pending) and return the error that names the session."""
        recorder, session = self.recorder, self.session
        started = recorder.last_checkpoint_id is not None
        try:
            payload = {"run_id": recorder.run_id, "interrupted": True, "error": "interrupted (Ctrl-C)"}
            recorder.record("run_fail", payload)
            if started:  # a branch's fork point is kept until a run on it wrote its first checkpoint
                session.context = without(session.context, "fork_checkpoint_id")
            self.runner.manager.mark_run(session, recorder.run_id, RunStatus.INTERRUPTED)
        except Exception as exc:  # the interrupt itself must still reach the caller
            log.warning("could not record the interrupt of %s: %s", session.session_id, exc)
        return RunInterrupted(session.session_id, started, pending=self._pending())

    def _pending(self) -> bool:
        """Whether the interrupted run left a step to run (`resume` it) rather than room for a new turn.

        Read from what was written, not from what the stream reported: a checkpoint put by a background
        thread may have landed after the interrupt (e.g. the first one, with `__start__` next).
        """
        try:
            refuse_unfinished(self.runner, self.session)
        except SessionError:
            return True
        except Exception as exc:  # unreadable: `resume` is the safe suggestion (it checks before acting)
            log.warning("could not read the state of %s after the interrupt: %s", self.session.session_id, exc)
            return True
        return False

    def _result(self) -> RunResult:
        """The run's result. A run whose graph finished: the state it streamed with its last checkpoint
        and that checkpoint's tail (no history replayed again). A run that stopped inside a step (an
        approval, an error): the thread's live state, which also has the writes of the step's finished
        tasks and only the interrupts still pending."""
        rt, session, recorder = self.runner, self.session, self.recorder
        if recorder.last_values is not None and recorder.last_checkpoint_id is not None:
            thread = rt.thread(session.tenant_id, session.session_id)
            at: RunnableConfig = {
                "configurable": {**thread["configurable"], "checkpoint_id": recorder.last_checkpoint_id}
            }
            snap = light_snapshot(rt, at)
            if not snap.next and not snap.tasks:
                return result_from_snapshot(session.session_id, snap._replace(values=recorder.last_values))
        return result(rt, session.session_id, session.tenant_id)

    def _finish(self, res: RunResult) -> None:
        """Write the run's closing entry (and the answer on the page), the branch head, and the run status."""
        rt, session, recorder = self.runner, self.session, self.recorder
        if res.status == RunStatus.COMPLETED:
            # Made durable by run_end's own commit right after it (one fsync for both entries).
            rt.manager.memory.add_assistant_message(session, res.answer, res.run_id, self.token, defer_commit=True)
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

    def _commit_quietly(self) -> None:
        """Make the run's deferred event entries durable however the stream ended (never masks its error)."""
        try:
            self.recorder.commit()
        except Exception as err:
            log.warning("could not sync the event log of %s: %s", self.session.session_id, err)


def without(context: dict[str, Any], key: str) -> dict[str, Any]:
    """`context` minus `key` (a new dict: the session's field is replaced, never mutated)."""
    return {k: v for k, v in context.items() if k != key}
