"""JSONL checkpointing for LangGraph: versioned documents, blobs, event log, validation.

This package imports nothing of the runtime built on it and names none of its concepts: a caller
pins what it cares about as checkpoint metadata (`expect_metadata=`, `validate=`, the
`runtime_snapshot` hook) and gives the event log its entry types (`events.EventSchema`), so
`JsonlCheckpointSaver` can be used in any LangGraph graph, with any thread_id, on its own.
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
