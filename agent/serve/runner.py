"""The AgentRunner the server drives: `agent.runner.ChunkRunner` (every raw graph chunk for the API's
stream modes) reading sessions from the shared layers only.
"""

from __future__ import annotations

from agent.runner import ChunkRunner
from agent.services import build_manager
from agent.session.manager import ChatSessionManager
from agent.session.stores.memory_cache import MemorySessionStore

# The server lives long next to CLI runs and workers on the same sessions: a session cached in
# this process (L1) could miss their changes, and a run started from a stale copy would append
# its entries to an old leaf. So the server reads every session from the shared layers.
L1_TTL_S = 1e-6


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
