"""A run's `RunEvent`s as the API's server-sent events, for the stream modes a client asked for.

Modes: `values` (the state after each step; the last one carries `__interrupt__` when the run
stopped for approval), `updates` (what each node returned), `messages` / `messages-tuple`
(`[message chunk, metadata]` pairs as the model streams), `custom` (what nodes write to the
stream writer), `checkpoints`, and `events`, which agentrt builds from the same chunks in the
shape of LangChain's `astream_events` v2 (`on_chain_end` per node, `on_chat_model_stream` per
token, `on_custom_event`): it is not a full callback trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from agent.results import RunEvent
from agent.serve.encode import INTERRUPT_KEY, jsonable
from agent.serve.runner import GRAPH_EVENT

SUPPORTED_MODES = frozenset({"values", "updates", "messages", "messages-tuple", "custom", "events", "checkpoints"})
DEFAULT_MODES = ("values",)


def normalize_modes(stream_mode: str | Iterable[str] | None) -> frozenset[str]:
    """The requested modes as a set; unknown ones are ignored as LangGraph's server ignores `debug` etc."""
    if stream_mode is None:
        return frozenset(DEFAULT_MODES)
    modes = {stream_mode} if isinstance(stream_mode, str) else set(stream_mode)
    return frozenset(m for m in modes if m in SUPPORTED_MODES)


def sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    """One server-sent event (`event:`, `data:` with compact JSON, optional `id:`)."""
    head = f"id: {event_id}\n" if event_id else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=repr)
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


class StreamTranslator:
    """Translates one run's RunEvents for one subscriber's modes."""

    def __init__(self, modes: frozenset[str], run_id: str) -> None:
        self.modes = modes
        self.run_id = run_id
        self.last_values: dict[str, Any] | None = None

    def translate(self, ev: RunEvent) -> Iterator[tuple[str, Any]]:
        """The (event, data) pairs this RunEvent gives."""
        if ev.kind != GRAPH_EVENT:
            return
        mode, chunk = ev.data["mode"], ev.data["chunk"]
        if mode == "checkpoints":
            values = jsonable(chunk.get("values") or {})
            self.last_values = values
            if "values" in self.modes:
                yield "values", values
            if "checkpoints" in self.modes:
                yield "checkpoints", jsonable(chunk)
        elif mode == "updates":
            if "updates" in self.modes:
                yield "updates", jsonable(chunk)
            if "events" in self.modes:
                for node, update in (chunk or {}).items():
                    yield "events", self._event("on_chain_end", node, {"output": jsonable(update)})
        elif mode == "messages":
            msg, meta = chunk
            if self.modes & {"messages", "messages-tuple"}:
                yield "messages", [jsonable(msg), jsonable(meta)]
            if "events" in self.modes:
                node = str((meta or {}).get("langgraph_node") or "model")
                yield "events", self._event("on_chat_model_stream", node, {"chunk": jsonable(msg)})
        elif mode == "custom":
            if "custom" in self.modes:
                yield "custom", jsonable(chunk)
            if "events" in self.modes:
                name = str(chunk.get("event", "custom")) if isinstance(chunk, dict) else "custom"
                yield "events", self._event("on_custom_event", name, jsonable(chunk))

    def closing(self, interrupts: list[dict[str, Any]]) -> Iterator[tuple[str, Any]]:
        """After the run: a last `values` event with the pending interrupts, as LangGraph sends it."""
        if interrupts and "values" in self.modes:
            yield "values", {**(self.last_values or {}), INTERRUPT_KEY: interrupts}

    def _event(self, event: str, name: str, data: Any) -> dict[str, Any]:
        return {"event": event, "name": name, "run_id": self.run_id, "tags": [], "metadata": {}, "data": data}
