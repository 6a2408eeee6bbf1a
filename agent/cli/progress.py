"""Live progress of a run on stderr: each node's label before its events, printed once and in order.

On a terminal: the node, the active skill, the todo list with done/total, tool calls with their
duration, and the answer's tokens as they stream. Without a terminal: the same as plain lines,
no colour and no token stream. `--quiet` and `--json` print nothing here.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from agent.cli.common import short, styled
from agent.core.text import printable

# Events emitted from inside a node that do not name it.
_NODE_OF = {"tool_call": "acting", "tool_result": "acting"}
_MARK = {"done": "✓", "in_progress": "→", "failed": "✗", "pending": "·"}


class Progress:
    """Renders a run's streamed events; remembers the answer it streamed so it is not printed twice."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.out = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.live = not quiet and bool(getattr(self.out, "isatty", lambda: False)())
        self.node: str | None = None
        self.started: dict[str, float] = {}
        self.streamed = ""  # the text streamed by the last model call of the reasoning node
        self.in_tokens = False
        self.todo_status: dict[str, str] = {}
        self.continuing = False  # set when the CLI itself resumes after its prompt: no "recovered" line

    # --- output --------------------------------------------------------------------------------
    def _line(self, text: str, style: str = "") -> None:
        if self.quiet:
            return
        if self.in_tokens:
            self.out.write("\n")
            self.in_tokens = False
        text = printable(text)  # names and ids from the model or the user: escaped, never acted on
        self.out.write((styled(text, style, self.out) if style else text) + "\n")
        self.out.flush()

    def _enter(self, node: str | None) -> None:
        if node and node != self.node:
            self._line(f"▸ {node}" if self.live else f"node {node}", "cyan")
            self.node = node

    # --- events --------------------------------------------------------------------------------
    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        """Render one event (`RunEvent.kind`, `RunEvent.data`)."""
        if kind == "node":
            self._enter(data.get("node"))
            self.node = None  # the node is done: a later run of it gets its label again
            return
        self._enter(data.get("node") or _NODE_OF.get(kind))
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(data)

    def _on_started(self, d: dict[str, Any]) -> None:
        self._line(f"session {d.get('session_id')}  run {d.get('run_id')}", "bold")

    def _on_token(self, d: dict[str, Any]) -> None:
        if d.get("node") != "reasoning":
            return  # the planner's JSON: its plan shows as the todo list
        text = str(d.get("text") or "")
        self.streamed += text
        if not self.live:
            return
        if not self.in_tokens:
            self.out.write(styled("  answer: ", "dim", self.out))
            self.in_tokens = True
        self.out.write(printable(text, keep="\n\t"))
        self.out.flush()

    def _on_model_call(self, d: dict[str, Any]) -> None:
        usage = d.get("usage") or {}
        n = int(d.get("call_index") or 0) + 1
        estimated = " (estimated)" if d.get("usage_source") == "estimate" else ""
        line = (
            f"  model call #{n}: {usage.get('input_tokens', '?')} in / {usage.get('output_tokens', '?')} out tokens"
            f"{estimated}"
        )
        if d.get("tool_calls"):
            line += f", asks for {', '.join(d['tool_calls'])}"
        self._line(line, "dim")
        for item in d.get("issues") or []:
            if isinstance(item, dict) and item.get("issue") != "no_usage":  # already said by "(estimated)"
                self._line(f"  model output: {item.get('issue')} -> {item.get('outcome')}", "yellow")
        if d.get("skill"):
            self._line(f"  skill: {d['skill']}", "magenta")
        if d.get("node") == "reasoning" and d.get("tool_calls"):
            self.streamed = ""  # that text led to tool calls; the answer is still to come

    def _on_tool_call(self, d: dict[str, Any]) -> None:
        self.started[str(d.get("tool_call_id"))] = time.monotonic()
        args = short(json.dumps(d.get("args"), ensure_ascii=False, default=str), 90)
        self._line(f"  tool {d.get('name')} [{d.get('tool_call_id')}] {args}", "yellow")

    def _on_tool_result(self, d: dict[str, Any]) -> None:
        began = self.started.pop(str(d.get("tool_call_id")), None)
        took = f", {1000 * (time.monotonic() - began):.0f} ms" if began is not None else ""
        tag = "replayed from the journal, " if d.get("replayed") else ""
        self._line(f"    -> {tag}{d.get('status')}, {d.get('size')} chars{took}", "dim")

    def _on_todo(self, d: dict[str, Any]) -> None:
        todos = [t for t in d.get("todos") or [] if isinstance(t, dict)]
        done = sum(1 for t in todos if t.get("status") == "done")
        first = not self.todo_status
        changed = [t for t in todos if self.todo_status.get(str(t.get("id"))) != t.get("status")]
        self.todo_status = {str(t.get("id")): str(t.get("status")) for t in todos}
        if first and self.live:  # the plan: the whole list once
            self._line(f"  todo {done}/{len(todos)} done", "green")
            for t in todos:
                self._line(f"    {_MARK.get(str(t.get('status')), '·')} {t.get('title')}", "dim")
            return
        news = ", ".join(f"{_MARK.get(str(t.get('status')), '·')} {t.get('title')}" for t in changed)
        self._line(f"  todo {done}/{len(todos)} done" + (f": {news}" if news and not first else ""), "green")

    def _on_compression(self, d: dict[str, Any]) -> None:
        before, after = d.get("tokens_before"), d.get("tokens_after")
        self._line(f"  compression tier {d.get('tier')}: {before} -> {after} tokens", "magenta")

    def _on_recovered(self, d: dict[str, Any]) -> None:
        if self.continuing:
            self.continuing = False
            return
        if d.get("finished"):
            self._line("the last run had already finished; its result:", "dim")
            return
        self._line(
            f"recovered checkpoint {d.get('checkpoint_id')} run {d.get('run_id')}, "
            f"next {', '.join(d.get('next_nodes') or [])}, "
            f"{d.get('tool_calls_done', 0)} tool calls of this run already done as `show` lists them "
            f"({d.get('journal_completed', 0)} in the tool journal: replayed from it, never run again; "
            "state-only tools such as update_todo have no journal record)",
            "bold",
        )
        if d.get("accepted"):
            self._line(f"accepted changes: {', '.join(d['accepted'])}", "yellow")

    def _on_interrupt(self, d: dict[str, Any]) -> None:
        for req in d.get("requests") or []:
            if isinstance(req, dict):
                self._line(f"approval needed: {req.get('name')} [{req.get('tool_call_id')}]", "yellow")

    def finish(self) -> None:
        """End an open token line."""
        if self.in_tokens:
            self.out.write("\n")
            self.out.flush()
            self.in_tokens = False
