"""User tools for the store tests: they reach LangGraph's store as any code in a node does,
through `langgraph.config.get_store()` (the run's tenant's part of `agentrt serve`'s store)."""

from __future__ import annotations

from langgraph.config import get_store

NOTES = ("notes",)


def remember(key: str, text: str) -> str:
    """Keep a note under `key` (namespace `notes`)."""
    get_store().put(NOTES, key, {"text": text})
    return f"noted {key}"


def recall(key: str) -> str:
    """The note under `key`, or that there is none."""
    item = get_store().get(NOTES, key)
    return f"note {key}: {item.value['text']}" if item is not None else f"no note {key}"
