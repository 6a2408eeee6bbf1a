"""The runner the server drives: an `AgentRunner` with the `GraphChunks` sink (every raw graph chunk
for the API's stream modes) that reads sessions from the shared layers only.
"""

from __future__ import annotations

from agent.core.config import AgentSettings
from agent.runner.agent_runner import AgentRunner
from agent.runner.chunks import GraphChunks
from agent.runner.services import build_manager
from agent.session.manager import ChatSessionManager
from agent.session.stores.memory_cache import MemorySessionStore

# The server lives long next to CLI runs and workers on the same sessions: a session cached in
# this process (L1) could miss their changes, and a run started from a stale copy would append
# its entries to an old leaf. So the server reads every session from the shared layers, and its
# L1 keeps nothing (not even a copy made to be dropped at the next read).


def serve_runner(settings: AgentSettings) -> AgentRunner:
    """The server's runner: graph chunks in its streams, sessions always read from the shared layers."""
    return AgentRunner(settings, chunks=GraphChunks(), sessions=uncached_manager)


def uncached_manager(settings: AgentSettings) -> ChatSessionManager:
    """The session manager, without a process-local cache (see above)."""
    manager = build_manager(settings)
    for layer in manager.read_order:
        if isinstance(layer, MemorySessionStore):
            layer.off()
    return manager
