"""The AgentRunner the server drives: the same runs, plus every raw graph chunk for the API's stream modes.

`AgentRunner.stream()` turns graph chunks into agentrt's `RunEvent`s (what the CLI and the page
show); the API also needs the chunks themselves (`values`, `updates`, `messages`, `custom`), so
this runner yields each one first as a `RunEvent("graph", {"mode", "chunk"})`. Lease, journal,
event log and recovery are untouched: it is the same run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent.results import RunEvent
from agent.runner import AgentRunner
from agent.turns import EventRecorder

GRAPH_EVENT = "graph"


class ServeRunner(AgentRunner):
    """`AgentRunner` whose streams also carry the raw graph chunks (kind `graph`)."""

    def _translate(self, mode: str, chunk: Any, recorder: EventRecorder) -> Iterator[RunEvent]:
        yield RunEvent(GRAPH_EVENT, {"mode": mode, "chunk": chunk})
        yield from super()._translate(mode, chunk, recorder)
