"""A thread's run events as the events of the thread-stream protocol (`threads.stream` of the newest
`langgraph_sdk`): `{"type": "event", "method", "params": {"namespace", "timestamp", "data"},
"seq", "event_id"}`.

From a run's server-sent events: its start is `lifecycle` `running`; `values`, `updates`, `tasks`,
`checkpoints` and `custom` keep their data; the model's streamed chunks (`messages-tuple`) become
`messages` events (`message-start`, `content-block-start`, `content-block-delta` per text chunk,
then at the message's end `content-block-finish` for its text and each tool call, and
`message-finish`); a pending approval is one `input.requested` per interrupt (`interrupt_id`,
`value`); the end is `lifecycle` `completed`, `interrupted` (waiting for an answer) or `failed`
(an error, or a cancel). Everything is on the root namespace (agentrt's graph has no subgraphs);
there are no `tools` events.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from agent.serve.assistants import GRAPH_ID
from agent.serve.encode import INTERRUPT_KEY
from agent.serve.run_record import ApiRunStatus
from agent.serve.thread_follow import END, ThreadItem

PASSED_ON = frozenset({"updates", "tasks", "checkpoints", "custom"})


@dataclass
class _Message:
    """A model message being streamed: its text so far and its tool calls, by chunk index."""

    text: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)


def _lifecycle(phase: str, run_id: str, error: str | None = None) -> tuple[str, dict[str, Any]]:
    data = {"event": phase, "graph_name": GRAPH_ID, "run_id": run_id}
    return ("lifecycle", data if error is None else {**data, "error": error})


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content or "")


class ProtocolTranslator:
    """Makes the protocol events of one connection (`seq` counts them from 1)."""

    def __init__(self) -> None:
        self.seq = 0
        self._open: dict[str, _Message] = {}
        self._failed: set[str] = set()

    def translate(self, item: ThreadItem) -> list[dict[str, Any]]:
        """The protocol events `item` gives, numbered."""
        if item.run is None:
            return []
        run_id = item.run.run_id
        out = [(m, d) for m, d in self._methods(item)]
        events = []
        for k, (method, data) in enumerate(out):
            self.seq += 1
            events.append(
                {
                    "type": "event",
                    "method": method,
                    "params": {"namespace": [], "timestamp": int(time.time() * 1000), "data": data},
                    "seq": self.seq,
                    "event_id": f"{run_id}:{item.event_id}:{k}",
                }
            )
        return events

    def _methods(self, item: ThreadItem) -> list[tuple[str, Any]]:
        name, data, rec = item.name, item.data, item.run
        assert rec is not None
        if name == "messages" and isinstance(data, list) and len(data) == 2:
            return self._message(data[0], data[1] if isinstance(data[1], dict) else {}, rec.run_id)
        closing = self._finish_all()
        if name == "metadata" and isinstance(data, dict) and "attempt" in data:
            return [*closing, _lifecycle("running", rec.run_id)]
        if name == "values" and isinstance(data, dict):
            if INTERRUPT_KEY in data:
                asked = [
                    {"interrupt_id": str(i.get("id")), "value": i.get("value"), "payload": i.get("value")}
                    for i in data[INTERRUPT_KEY]
                    if isinstance(i, dict)
                ]
                return [*closing, *(("input.requested", a) for a in asked)]
            return [*closing, ("values", data)]
        if name == "updates" and isinstance(data, dict) and set(data) == {INTERRUPT_KEY}:
            return closing
        if name in PASSED_ON:
            return [*closing, (name, data)]
        if name == "error":
            self._failed.add(rec.run_id)
            message = data.get("message") if isinstance(data, dict) else str(data)
            return [*closing, _lifecycle("failed", rec.run_id, message)]
        if name == END:
            return [*closing, *self._end(item)]
        return closing

    def _end(self, item: ThreadItem) -> list[tuple[str, Any]]:
        rec = item.run
        assert rec is not None
        if rec.run_id in self._failed:
            self._failed.discard(rec.run_id)
            return []
        if rec.status is ApiRunStatus.ERROR:
            message = (rec.error or {}).get("message", "the run failed")
            return [_lifecycle("failed", rec.run_id, message)]
        if rec.status is ApiRunStatus.INTERRUPTED:
            error = f"run {rec.run_id} was cancelled; a run without input continues it"
            return [_lifecycle("failed", rec.run_id, error)]
        phase = "interrupted" if rec.interrupts else "completed"
        return [_lifecycle(phase, rec.run_id)]

    def _message(self, msg: Any, meta: dict[str, Any], run_id: str) -> list[tuple[str, Any]]:
        if not isinstance(msg, dict) or not str(msg.get("type", "")).lower().startswith("ai"):
            return []
        mid = str(msg.get("id") or "")
        out: list[tuple[str, Any]] = []
        current = self._open.get(mid)
        if current is None:
            current = self._open[mid] = _Message()
            metadata = {"run_id": run_id, "langgraph_node": meta.get("langgraph_node")}
            if meta.get("ls_model_name"):
                metadata["model"] = meta["ls_model_name"]
            if meta.get("ls_provider"):
                metadata["provider"] = meta["ls_provider"]
            out.append(("messages", {"event": "message-start", "role": "ai", "id": mid, "metadata": metadata}))
            start = {"event": "content-block-start", "index": 0, "content": {"type": "text", "text": ""}}
            out.append(("messages", {**start, "message_id": mid}))
        whole = not str(msg.get("type", "")).endswith("Chunk")
        text = _text(msg.get("content"))
        piece = text[len(current.text) :] if whole and text.startswith(current.text) else text
        if piece:
            current.text += piece
            delta = {"event": "content-block-delta", "index": 0, "delta": {"type": "text-delta", "text": piece}}
            out.append(("messages", {**delta, "message_id": mid}))
        for n, call in enumerate(msg.get("tool_call_chunks") or []):
            into = current.calls.setdefault(int(call.get("index") or n), {"id": "", "name": "", "args": ""})
            for key in ("id", "name", "args"):
                into[key] += str(call.get(key) or "")
        if whole:
            for n, call in enumerate(msg.get("tool_calls") or []):
                args = json.dumps(call.get("args") or {})
                current.calls[n] = {"id": str(call.get("id") or ""), "name": str(call.get("name") or ""), "args": args}
            out.extend(self._finish(mid))
        return out

    def _finish_all(self) -> list[tuple[str, Any]]:
        return [event for mid in list(self._open) for event in self._finish(mid)]

    def _finish(self, mid: str) -> list[tuple[str, Any]]:
        current = self._open.pop(mid)
        text = {"type": "text", "text": current.text}
        out: list[tuple[str, Any]] = [
            ("messages", {"event": "content-block-finish", "index": 0, "content": text, "message_id": mid})
        ]
        for n, (_, call) in enumerate(sorted(current.calls.items()), start=1):
            try:
                args = json.loads(call["args"] or "{}")
            except ValueError:
                args = {}
            block = {"type": "tool_call", "id": call["id"], "name": call["name"], "args": args}
            out.append(("messages", {"event": "content-block-finish", "index": n, "content": block, "message_id": mid}))
        out.append(("messages", {"event": "message-finish", "message_id": mid}))
        return out


def wanted(event: dict[str, Any], channels: frozenset[str], namespaces: list[list[str]] | None) -> bool:
    """Whether a connection that asked for `channels` (and `namespaces`) gets `event`."""
    method = str(event["method"])
    channel = "input" if method == "input.requested" else method
    if namespaces is not None and [] not in namespaces:
        return False  # every event is on the root namespace
    if channel in channels:
        return True
    if channel == "custom":
        data = event["params"]["data"]
        name = data.get("name") or data.get("event") if isinstance(data, dict) else None
        return f"custom:{name}" in channels
    return False
