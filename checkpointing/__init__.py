"""JSONL checkpointing for LangGraph: versioned documents, blobs, event log, validation.

This package imports nothing else of agentrt, so `JsonlCheckpointSaver` can be used in any
LangGraph graph on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["JsonlCheckpointSaver"]

if TYPE_CHECKING:
    from checkpointing.saver import JsonlCheckpointSaver


def __getattr__(name: str) -> Any:
    # Lazy, so importing a light submodule (errors, ids, records) does not load LangGraph.
    if name == "JsonlCheckpointSaver":
        from checkpointing.saver import JsonlCheckpointSaver

        return JsonlCheckpointSaver
    raise AttributeError(name)
