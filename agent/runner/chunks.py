"""The graph's stream chunks: the run's own events made of them (`translate`), and the sink a caller
passes to receive the raw chunks as well (`ChunkSink`; the server and the Celery workers pass
`GraphChunks`, which puts every chunk in the run's stream; `clean_stop` tells which of those chunks a
run may be stopped after).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from langgraph.types import StreamMode

from agent.core.results import RunEvent
from agent.runner.turns import EventRecorder

STREAM_MODES: list[StreamMode] = ["updates", "custom", "checkpoints"]
"""What a run streams; tokens come through `custom` (`agent.runner.tokens.TokenStream`), not LangGraph's
`messages` mode, whose handler rescans every node's input (a step would cost more as history grows).
A sink that asks for `messages` (the server's, whose API offers that mode) gets tokens from it."""

QUIET_MODES: list[StreamMode] = [m for m in STREAM_MODES if m != "custom"]
"""What a run streams when its caller takes only the result (`RunOptions.live_events` False)."""

GRAPH_EVENT = "graph"
"""The kind of the `RunEvent`s `GraphChunks` puts in a run's stream, each carrying one raw graph chunk."""


class ChunkSink(Protocol):
    """What a runner's caller passes to receive the graph's raw chunks (`Runner(chunks=...)`).

    The run streams its own modes (`STREAM_MODES`) plus the sink's `modes`, subgraphs too when
    `subgraphs`; each chunk goes to the sink first (`ns`: the subgraph's namespace, empty for the
    graph's own), and the events it returns go into the run's stream, before the run's own events
    made of that chunk.
    """

    @property
    def modes(self) -> tuple[StreamMode, ...]:
        """The LangGraph stream modes the sink wants beyond the run's own (`messages`: tokens come from it)."""
        ...

    @property
    def subgraphs(self) -> bool:
        """Whether the sink wants the chunks of subgraphs too."""
        ...

    def __call__(self, ns: tuple[str, ...], mode: str, chunk: Any) -> Iterable[RunEvent]:
        """One chunk of the graph: the events to put in the run's stream for it (none: nothing)."""
        ...


@dataclass(frozen=True)
class GraphChunks:
    """A sink that puts every raw chunk in the run's stream as a `GRAPH_EVENT` RunEvent (`mode`,
    `chunk`, `ns`), LangGraph's `messages`, `tasks` and `debug` modes and subgraphs included.

    `agentrt serve` passes it (its API's stream modes are made of these chunks), and so do the
    Celery workers, so a turn the server submitted streams the same modes from a worker.
    """

    modes: tuple[StreamMode, ...] = ("messages", "tasks", "debug")
    subgraphs: bool = True

    def __call__(self, ns: tuple[str, ...], mode: str, chunk: Any) -> Iterable[RunEvent]:
        return (RunEvent(GRAPH_EVENT, {"mode": mode, "chunk": chunk, "ns": list(ns)}),)


UNSAFE_NEXT = "acting"
"""The node that runs a model reply's tool calls: a run stopped before it leaves them without results."""


def clean_stop(ev: RunEvent) -> bool:
    """Whether a run streaming `GraphChunks` may stop after `ev` and leave a state a new turn can
    follow: a checkpoint of the graph whose next step is not the tools of a model reply."""
    if ev.kind != GRAPH_EVENT or ev.data.get("mode") != "checkpoints" or ev.data.get("ns"):
        return False
    chunk: Any = ev.data.get("chunk") or {}
    return UNSAFE_NEXT not in list(chunk.get("next") or [])


def translate(mode: str, chunk: Any, recorder: EventRecorder) -> Iterator[RunEvent]:
    """One chunk of the graph's own stream as the run's RunEvents; interrupts and node ends are recorded."""
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
