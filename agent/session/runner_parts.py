"""What the session upkeep (`erase`, `removal`, `retention`, `sweep`) uses of a runner.

These operations are handed the runner by their caller (the CLI, the workers, `agentrt serve`);
they read only the parts named here, so this floor never imports the runner above it:
`agent.runner.base_runner.Runner` has every one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from agent.core.config import AgentSettings
    from agent.session.lease import SessionLease
    from agent.session.manager import ChatSessionManager
    from checkpointing.blobs import Blobs


class RunnerParts(Protocol):
    """A runner's settings, session manager, lease, checkpoint saver and blob store."""

    @property
    def settings(self) -> AgentSettings:
        """The runner's settings."""
        ...

    @property
    def manager(self) -> ChatSessionManager:
        """The session manager (the session documents on every layer)."""
        ...

    @property
    def lease(self) -> SessionLease:
        """The session lease (a removal or a replay holds it, as a run does)."""
        ...

    @property
    def saver(self) -> BaseCheckpointSaver:
        """The checkpoint saver (a removed session's checkpoints go through it)."""
        ...

    @property
    def blobs(self) -> Blobs:
        """The record store's blobs (what a removal reclaims)."""
        ...
