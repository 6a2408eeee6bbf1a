"""The AgentRunner the server drives: the same runs, plus every raw graph chunk for the API's stream modes.

`AgentRunner.stream()` turns graph chunks into agentrt's `RunEvent`s (what the CLI and the page
show); the API also needs the chunks themselves (`values`, `updates`, `messages`, `custom`), so
this runner yields each one first as a `RunEvent("graph", {"mode", "chunk", "ns"})`. Lease, journal,
event log and recovery are untouched: it is the same run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langgraph.types import StreamMode

from agent.results import RunEvent
from agent.runner import AgentRunner
from agent.services import build_manager
from agent.session.manager import ChatSessionManager
from agent.session.stores.memory import MemorySessionStore
from agent.turns import EventRecorder

GRAPH_EVENT = "graph"
# The server lives long next to CLI runs and workers on the same sessions: a session cached in
# this process (L1) could miss their changes, and a run started from a stale copy would append
# its entries to an old leaf. So the server reads every session from the shared layers.
L1_TTL_S = 1e-6


class ChunkRunner(AgentRunner):
    """`AgentRunner` whose streams also carry the raw graph chunks (kind `graph`: `mode`, `chunk`, and
    `ns`, the subgraph's namespace, empty for the graph's own), subgraphs and LangGraph's `tasks` and
    `debug` modes included; the workers run it too, so a turn submitted by the server streams the
    same modes from a worker. The CLI's runner streams none of these."""

    stream_messages = True  # the API's `messages` mode
    extra_stream_modes: tuple[StreamMode, ...] = ("tasks", "debug")
    stream_subgraphs = True

    def _translate_in(self, ns: tuple[str, ...], mode: str, chunk: Any, recorder: EventRecorder) -> Iterator[RunEvent]:
        yield RunEvent(GRAPH_EVENT, {"mode": mode, "chunk": chunk, "ns": list(ns)})
        yield from super()._translate_in(ns, mode, chunk, recorder)


class ServeRunner(ChunkRunner):
    """The server's runner: graph chunks in its streams, sessions always read from the shared layers."""

    @property
    def manager(self) -> ChatSessionManager:
        """The session manager, without a process-local cache worth the name (see `L1_TTL_S`)."""
        if self._manager is None:
            manager = build_manager(self.settings)
            for layer in manager.read_order:
                if isinstance(layer, MemorySessionStore):
                    layer.ttl_seconds = L1_TTL_S
            self._manager = manager
        return self._manager
