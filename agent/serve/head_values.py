"""A thread's values and pending interrupts as JSON, read from its checkpoint and kept by checkpoint.

What LangGraph's `get_state` shows for a checkpoint depends only on the graph, the checkpoint and its
pending writes: a checkpoint never changes once written, its ordinary writes are only added to, and
a special write (an interrupt, a resume, an error) replaces the one before it for the same task. So
the JSON of a thread's values is kept under (thread, checkpoint id, pending writes, with the special
writes' content), in a bounded least-recently-used map. A run on any server or worker writes a new
head checkpoint or new writes, which make another key: nothing kept ever has to be dropped for
being stale, only for room. Each read still loads the checkpoint (one `get_tuple`); what a kept
answer saves is building the snapshot and its JSON.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver, CheckpointTuple
from langgraph.types import StateSnapshot

from agent.serve.encode import jsonable

Values = tuple[dict[str, Any], dict[str, list[Any]]]
_KEPT = 256  # threads kept: a few pages of the lists agent-chat-ui shows; each holds its values (messages)


class HeadValues:
    """The values and pending interrupts (by task id) of the checkpoint a config names, as JSON."""

    def __init__(self, graph: Any, size: int = _KEPT) -> None:
        self._graph = graph
        self._size = size
        self._kept: OrderedDict[tuple[Any, ...], Values] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, config: RunnableConfig) -> Values:
        """What `graph.get_state(config)` shows as JSON, from the kept answer when the checkpoint and
        its writes are the ones it was made from."""
        graph = self._graph
        saver = graph.checkpointer
        build = getattr(graph, "_prepare_state_snapshot", None)
        conf = config.get("configurable") or {}
        if not isinstance(saver, BaseCheckpointSaver) or build is None or conf.get("checkpoint_ns"):
            return _json(graph.get_state(config))
        # get_state's own steps for a root graph (no namespace), so the snapshot is built from the
        # very tuple the key is made of (a second load could see newer writes than the key says)
        full = merge_configs(graph.config, config) if graph.config else config
        full = {**full, "configurable": {**full["configurable"], "thread_id": str(conf["thread_id"])}}
        saved = saver.get_tuple(full)
        if saved is None:
            return {}, {}
        live = "checkpoint_id" not in conf
        key = _key(conf, saved, live)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                return kept
        values = _json(build(full, saved, saver=saver, recurse=False, live=live))
        with self._lock:
            self._kept[key] = values
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return values


def _json(snap: StateSnapshot) -> Values:
    interrupts = {t.id: [jsonable(i) for i in t.interrupts] for t in snap.tasks if t.interrupts}
    return jsonable(snap.values or {}), interrupts


def _key(conf: dict[str, Any], saved: CheckpointTuple, live: bool) -> tuple[Any, ...]:
    # ordinary writes are never replaced (first per task and index wins); special ones are, so
    # their content is part of the key
    writes = tuple(
        (task, channel, repr(value) if channel in WRITES_IDX_MAP else None)
        for task, channel, value in saved.pending_writes or ()
    )
    return (conf.get("tenant_id"), str(conf["thread_id"]), saved.checkpoint["id"], live, writes)
