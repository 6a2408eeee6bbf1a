"""agentrt: a graph-orchestrated agent runtime on LangGraph that survives crashes, long tasks and branching.

The public face: `AgentRunner` (run / stream / resume / pause / end / fork), `load_settings`,
the exception tree in `agent.core.errors`, and `ScriptedChatModel` for tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.loop.token_count import install_offline_encodings

# tiktoken must never download: point it at hash-checked encoding files that come with the install.
install_offline_encodings()

__all__ = ["AgentRunner", "RunEvent", "RunResult", "ScriptedChatModel", "load_settings"]

if TYPE_CHECKING:
    from agent.core.config import load_settings
    from agent.loop.models import ScriptedChatModel
    from agent.runner import AgentRunner, RunEvent, RunResult


def __getattr__(name: str) -> Any:
    # Lazy so `import agent` stays cheap and the checkpointing package can be used alone.
    if name == "AgentRunner" or name in ("RunEvent", "RunResult"):
        from agent import runner

        return getattr(runner, name)
    if name == "ScriptedChatModel":
        from agent.loop.models import ScriptedChatModel

        return ScriptedChatModel
    if name == "load_settings":
        from agent.core.config import load_settings

        return load_settings
    raise AttributeError(name)
