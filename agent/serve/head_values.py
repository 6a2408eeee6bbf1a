"""A thread's values and pending interrupts, or its whole state, as JSON, read from its checkpoint
and kept by checkpoint.

What LangGraph's `get_state` shows for a checkpoint depends only on the graph, the checkpoint and its
pending writes: a checkpoint never changes once written, its ordinary writes are only added to, and
a special write (an interrupt, a resume, an error) replaces the one before it for the same task. So
the JSON of a thread's values is kept under (thread, checkpoint id, pending writes, with the special
writes' content), in a least-recently-used map bounded by entries and by the size of their JSON (the
states of a long thread are large: a 260-tool-step thread's 526 states are 350 MB of JSON, 150 MB in
memory, so one history request would otherwise keep them all). A run on any server or worker writes
a new head checkpoint or new writes, which make another key: nothing kept ever has to be dropped for
being stale, only for room. On the JSONL saver a read first takes the thread's head mark
(`checkpointing.saver_marks`: the checkpoint id and the run files' ends, no load): an answer kept
under the same mark is given without loading the checkpoint at all; otherwise (and on another saver)
it loads the checkpoint (one `get_tuple`) and what a kept answer saves is building the snapshot and
its JSON.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver, CheckpointTuple
from langgraph.types import StateSnapshot

from agent.serve.encode import jsonable, thread_state
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.saver_marks import head_mark

Values = tuple[dict[str, Any], dict[str, list[Any]]]
_KEPT = 1024  # answers kept: a few pages of the lists agent-chat-ui shows, and the states of their histories
_KEPT_BYTES = 64 * 1024 * 1024  # ... and their JSON's size in all (in memory: about half of it)


class HeadValues:
    """The values and pending interrupts (by task id) of the checkpoint a config names, as JSON."""

    def __init__(self, graph: Any, size: int = _KEPT, max_bytes: int = _KEPT_BYTES) -> None:
        self._graph = graph
        self._size = size
        self._max_bytes = max_bytes
        self._kept: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()  # key -> (answer, JSON size)
        self.kept_bytes = 0
        """The JSON size of the answers kept (the newest one is kept whatever its size)."""
        self._lock = threading.Lock()

    def read(self, config: RunnableConfig) -> Values:
        """What `graph.get_state(config)` shows as JSON, from the kept answer when the checkpoint and
        its writes are the ones it was made from."""
        found = self._kept_or_made(config, "values", _json)
        return found if found is not None else ({}, {})

    def state(self, config: RunnableConfig) -> dict[str, Any] | None:
        """The API's ThreadState of the checkpoint `config` names (None: the thread has none there),
        kept as the values are; shared between callers, never to be changed."""
        thread_id = str((config.get("configurable") or {})["thread_id"])
        return self._kept_or_made(config, "state", lambda snap: thread_state(thread_id, snap))

    def _kept_or_made(self, config: RunnableConfig, kind: str, make: Callable[[StateSnapshot], Any]) -> Any:
        """`make(snapshot)` of the checkpoint `config` names, kept by (kind, checkpoint, writes); None
        when there is no checkpoint."""
        graph = self._graph
        saver = graph.checkpointer
        build = getattr(graph, "_prepare_state_snapshot", None)
        conf = config.get("configurable") or {}
        if not isinstance(saver, BaseCheckpointSaver) or build is None or conf.get("checkpoint_ns"):
            snap = graph.get_state(config)
            return None if snap.metadata is None else make(snap)
        # get_state's own steps for a root graph (no namespace), so the snapshot is built from the
        # very tuple the key is made of (a second load could see newer writes than the key says)
        full = merge_configs(graph.config, config) if graph.config else config
        full = {**full, "configurable": {**full["configurable"], "thread_id": str(conf["thread_id"])}}
        live = "checkpoint_id" not in conf
        marked = None
        if isinstance(saver, JsonlCheckpointSaver):  # the files' ends say whether anything was written
            mark = head_mark(saver, full)
            if mark is None:
                return None
            marked = (kind, conf.get("tenant_id"), str(conf["thread_id"]), live, mark)
            found = self._get(marked)
            if found is not None:
                return found
        saved = saver.get_tuple(full)
        if saved is None:
            return None
        key = (kind, *_key(conf, saved, live))
        made = self._get(key)
        if made is None:
            made = make(build(full, saved, saver=saver, recurse=False, live=live))
            self._put(key, made)
        if marked is not None:
            self._put(marked, made, 0)  # the same answer under its second key: counted once
        return made

    def _get(self, key: tuple[Any, ...]) -> Any:
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                return None
            self._kept.move_to_end(key)
            return kept[0]

    def _put(self, key: tuple[Any, ...], made: Any, size: int | None = None) -> None:
        if size is None:
            size = len(orjson.dumps(made, default=repr))
        with self._lock:
            old = self._kept.pop(key, None)
            self.kept_bytes += size - (old[1] if old else 0)
            self._kept[key] = (made, size)
            while len(self._kept) > 1 and (len(self._kept) > self._size or self.kept_bytes > self._max_bytes):
                _, (_, dropped) = self._kept.popitem(last=False)
                self.kept_bytes -= dropped


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
