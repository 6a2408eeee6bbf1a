"""JSONL checkpointing for LangGraph: versioned documents, blobs, event log, validation.

This package imports nothing else of agentrt, so `JsonlCheckpointSaver` can be used in any
LangGraph graph on its own.
"""

from checkpointing.saver import JsonlCheckpointSaver

__all__ = ["JsonlCheckpointSaver"]
