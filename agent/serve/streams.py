"""A run's `RunEvent`s as the API's server-sent events, for the stream modes the run was asked for.

Modes, shaped as LangGraph's own server sends them: `values` (the state after each step; the last
one carries `__interrupt__` when the run stopped for approval), `updates` (what each node returned),
`messages-tuple` (`[message chunk, metadata]` pairs as the model streams), `messages` (per message:
`messages/metadata` once, then `messages/partial` with the message so far after each chunk, or
`messages/complete` for a message that came whole), `custom`
(what nodes write to the stream writer), `checkpoints`, `tasks` (each task's start and result),
`debug` (LangGraph's `checkpoint` / `task` / `task_result` records, with `checkpoint` and
`parent_checkpoint` references), and `events`, which agentrt builds from the same chunks in the
shape of LangChain's `astream_events` v2: `on_chain_start` / `on_chain_end` for the graph and each
node, `on_chat_model_start`, `on_chat_model_stream` per token and `on_chat_model_end` per model
call, `on_custom_event`. It is not a full callback trace (no tool or prompt events).

With `stream_subgraphs`, an event of a subgraph is named `mode|namespace` (the namespace's parts
joined by `|`), as LangGraph's server names it; without, subgraphs send nothing of their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from agent.core.results import RunEvent, jsonable
from agent.runner.chunks import GRAPH_EVENT
from agent.serve.encode import INTERRUPT_KEY

SUPPORTED_MODES = frozenset(
    {"values", "updates", "messages", "messages-tuple", "custom", "events", "checkpoints", "tasks", "debug"}
)
DEFAULT_MODES = ("values",)
GRAPH_NAME = "LangGraph"
"""The name of the graph's own chain in `events` (LangGraph's server uses the same)."""


def normalize_modes(stream_mode: str | Iterable[str] | None) -> frozenset[str]:
    """The requested modes as a set; unknown ones (`tools`, `lifecycle`) are ignored."""
    if stream_mode is None:
        return frozenset(DEFAULT_MODES)
    modes = {stream_mode} if isinstance(stream_mode, str) else set(stream_mode)
    return frozenset(m for m in modes if m in SUPPORTED_MODES)


def mode_of(event: str) -> str:
    """The stream mode an event name belongs to (`updates|child:1` -> `updates`)."""
    return event.split("|", 1)[0]


def wanted(event: str, modes: frozenset[str]) -> bool:
    """Whether a client that asked for `modes` gets events named `event` (`metadata`, `error` always)."""
    mode = mode_of(event)
    if mode == "messages":
        return bool(modes & {"messages", "messages-tuple"})
    return mode in modes or mode not in SUPPORTED_MODES


def sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    """One server-sent event (`event:`, `data:` with compact JSON, optional `id:`)."""
    head = f"id: {event_id}\n" if event_id else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=repr)
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


class StreamTranslator:
    """Translates one run's RunEvents for the run's modes (once per run: every subscriber and the
    replay copy read the same events)."""

    def __init__(self, modes: frozenset[str], run_id: str, subgraphs: bool = False) -> None:
        self.modes = modes
        self.run_id = run_id
        self.subgraphs = subgraphs
        self.last_values: dict[str, Any] | None = None
        self._started = False
        self._so_far: dict[str, Any] = {}
        """The `messages` mode: each streaming message's chunks added up, by message id."""
        self._models: dict[str, dict[str, Any]] = {}
        """Model calls streaming, by message id: their metadata, node, last chunk and text so far."""

    def translate(self, ev: RunEvent) -> Iterator[tuple[str, Any]]:
        """The (event, data) pairs this RunEvent gives."""
        if ev.kind != GRAPH_EVENT:
            return
        if "events" in self.modes and not self._started:
            self._started = True
            yield "events", self._event("on_chain_start", GRAPH_NAME, {"input": {}}, run_id=self.run_id)
        mode, chunk = ev.data["mode"], ev.data["chunk"]
        ns = tuple(ev.data.get("ns") or ())
        if "events" in self.modes:
            yield from self._events(mode, chunk)
        if ns and not self.subgraphs:
            return
        suffix = "|" + "|".join(ns) if ns else ""
        if mode == "checkpoints":
            values = jsonable(chunk.get("values") or {})
            # The checkpoint saved before the input is applied is not a step: LangGraph's server
            # sends no `values` for it (its first `values` already holds the input).
            is_step = (chunk.get("metadata") or {}).get("source") != "input"
            if not ns and is_step:
                self.last_values = values
            if "values" in self.modes and is_step:
                yield "values" + suffix, values
            if "checkpoints" in self.modes:
                yield "checkpoints" + suffix, jsonable(chunk)
        elif mode == "messages":
            msg, meta = chunk
            if "messages-tuple" in self.modes:
                yield "messages" + suffix, [jsonable(msg), jsonable(meta)]
            if "messages" in self.modes:
                yield from self._message_so_far(msg, meta, suffix)
        elif mode == "debug":
            if "debug" in self.modes:
                yield "debug" + suffix, debug_record(jsonable(chunk))
        elif mode in ("updates", "custom", "tasks") and mode in self.modes:
            yield mode + suffix, jsonable(chunk)

    def _message_so_far(self, msg: Any, meta: Any, suffix: str) -> Iterator[tuple[str, Any]]:
        """The `messages` mode: a message's metadata when it first streams, then the message so far
        (its chunks added up) after each chunk, or the whole message when it came whole."""
        from langchain_core.messages import BaseMessageChunk, message_chunk_to_message

        msg = _as_message(msg)
        mid = str(getattr(msg, "id", None) or "")
        so_far = self._so_far.get(mid)
        if so_far is None:
            yield "messages/metadata" + suffix, {mid: {"metadata": jsonable(meta)}}
        if isinstance(msg, BaseMessageChunk):
            so_far = msg if not isinstance(so_far, BaseMessageChunk) else so_far + msg
            self._so_far[mid] = so_far
            yield "messages/partial" + suffix, [jsonable(so_far)]
        else:
            self._so_far[mid] = msg
            whole = message_chunk_to_message(msg) if not isinstance(msg, dict) else msg
            yield "messages/complete" + suffix, [jsonable(whole)]

    def _events(self, mode: str, chunk: Any) -> Iterator[tuple[str, Any]]:
        if mode == "tasks":
            task = jsonable(chunk)
            if "input" in task:  # a task starts
                meta = {"langgraph_node": task.get("name"), "langgraph_triggers": task.get("triggers")}
                yield "events", self._event("on_chain_start", task["name"], {"input": task["input"]}, task["id"], meta)
            else:  # its result: the model calls it made end first
                yield from self._models_end(str(task.get("name")), task.get("result"))
                yield "events", self._event("on_chain_end", task["name"], {"output": task.get("result")}, task["id"])
        elif mode == "messages":
            msg, meta = jsonable(chunk[0]), jsonable(chunk[1]) or {}
            if not meta.get("ls_model_type"):  # a message a node wrote to the state, not a model's
                return
            mid = str(msg.get("id") or "") if isinstance(msg, dict) else ""
            name = str(meta.get("ls_model_name") or meta.get("ls_provider") or "chat_model")
            call = self._models.get(mid)
            if call is None:
                call = self._models[mid] = {"meta": meta, "name": name, "node": meta.get("langgraph_node"), "text": ""}
                yield "events", self._event("on_chat_model_start", name, {"input": {}}, mid, meta)
            call["last"] = msg
            if isinstance(msg, dict) and isinstance(msg.get("content"), str):
                call["text"] += msg["content"]
            if isinstance(msg, dict) and str(msg.get("type", "")).endswith("Chunk"):
                yield "events", self._event("on_chat_model_stream", name, {"chunk": msg}, mid, meta)
            else:  # a whole message: the model did not stream, this is its answer
                yield from self._model_end(mid, msg)
        elif mode == "custom":
            name = str(chunk.get("event", "custom")) if isinstance(chunk, dict) else "custom"
            yield "events", self._event("on_custom_event", name, jsonable(chunk))

    def _models_end(self, node: str, result: Any) -> Iterator[tuple[str, Any]]:
        """`on_chat_model_end` for each model call of `node` still open, with the message the node
        returned when it is there (else the chunks joined)."""
        returned = {}
        messages = result.get("messages") if isinstance(result, dict) else None
        for m in messages if isinstance(messages, list) else []:
            if isinstance(m, dict) and m.get("id"):
                returned[str(m["id"])] = m
        for mid in [k for k, c in self._models.items() if c["node"] == node]:
            call = self._models[mid]
            last: dict[str, Any] = call["last"] if isinstance(call.get("last"), dict) else {}
            joined = {**last, "type": "ai", "content": call["text"]}
            yield from self._model_end(mid, returned.get(mid, joined))

    def _model_end(self, mid: str, message: Any) -> Iterator[tuple[str, Any]]:
        call = self._models.pop(mid, None)
        if call is not None:
            yield "events", self._event("on_chat_model_end", call["name"], {"output": message}, mid, call["meta"])

    def closing(self, interrupts: list[dict[str, Any]], error: bool = False) -> Iterator[tuple[str, Any]]:
        """After the run: the graph's `on_chain_end`, then a last `values` event with the pending
        interrupts, as LangGraph sends it."""
        if "events" in self.modes and self._started and not error:
            for mid in list(self._models):
                yield from self._model_end(mid, self._models[mid].get("last"))
            output = self.last_values or {}
            yield "events", self._event("on_chain_end", GRAPH_NAME, {"output": output}, run_id=self.run_id)
        if interrupts and "values" in self.modes:
            yield "values", {**(self.last_values or {}), INTERRUPT_KEY: interrupts}

    def _event(
        self, event: str, name: str, data: Any, run_id: str | None = None, metadata: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        parents = [] if run_id == self.run_id else [self.run_id]
        return {
            "event": event,
            "name": name,
            "run_id": run_id or self.run_id,
            "tags": [],
            "metadata": metadata or {},
            "data": data,
            "parent_ids": parents,
        }


def debug_record(chunk: Any) -> Any:
    """A `debug` chunk as LangGraph's server sends it: a checkpoint's payload also names its
    `checkpoint` and `parent_checkpoint`, and each task's `state` config becomes its `checkpoint`."""
    if not isinstance(chunk, dict) or chunk.get("type") != "checkpoint" or not isinstance(chunk.get("payload"), dict):
        return chunk
    payload = chunk["payload"]
    tasks = []
    for task in payload.get("tasks") or []:
        state = task.get("state") if isinstance(task, dict) else None
        if isinstance(state, dict) and state.get("configurable"):
            task = {**{k: v for k, v in task.items() if k != "state"}, "checkpoint": state["configurable"]}
        tasks.append(task)
    ref = {
        "checkpoint": _checkpoint_ref(payload.get("config")),
        "parent_checkpoint": _checkpoint_ref(payload.get("parent_config")),
        "tasks": tasks,
    }
    return {**chunk, "payload": {**payload, **ref}}


def _checkpoint_ref(config: Any) -> dict[str, Any] | None:
    conf = (config or {}).get("configurable") if isinstance(config, dict) else None
    if not conf or not conf.get("thread_id") or not conf.get("checkpoint_id"):
        return None
    ref = {"checkpoint_id": conf["checkpoint_id"], "thread_id": conf["thread_id"]}
    for key in ("checkpoint_ns", "checkpoint_map"):
        if key in conf:
            ref[key] = conf[key] or ("" if key == "checkpoint_ns" else conf[key])
    return ref


def _as_message(msg: Any) -> Any:
    """A message that crossed a worker's JSON (a dict) as the message object it was, so its chunks
    add up; a dict no message class reads stays as it is."""
    if not isinstance(msg, dict):
        return msg
    from langchain_core.messages import AIMessageChunk, ToolMessageChunk, convert_to_messages

    chunk_class = {"AIMessageChunk": AIMessageChunk, "ToolMessageChunk": ToolMessageChunk}.get(str(msg.get("type")))
    try:
        return chunk_class(**msg) if chunk_class is not None else convert_to_messages([msg])[0]
    except (TypeError, ValueError, NotImplementedError):
        return msg
