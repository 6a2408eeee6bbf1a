"""The compare-and-swap of a tenant's document in the record store: the loop a tenant's
assistants (`assistant_doc`) and crons (`cron_doc`) are changed with."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from agent.core.errors import BackendUnavailable
from checkpointing.store.base import SessionStreams

SWAP_TRIES = 200
"""How often a change is tried again when another writer changed the document in between."""

T = TypeVar("T")


def swap_doc(
    session: SessionStreams,
    name: str,
    key: str,
    edit: Callable[[dict[str, Any]], T],
    first: Callable[[], dict[str, Any]],
    what: str,
) -> tuple[T, bool]:
    """Apply `edit` to the values under `key` of document `name` and save them if nobody changed the
    document meanwhile, else read it again and retry; what `edit` returns, and whether this call made
    the document (from `first()`). An `edit` that raises saves nothing. `what` names the values in
    the error after `SWAP_TRIES` tries."""
    for _ in range(SWAP_TRIES):
        doc, version = session.load_doc(name)
        values = copy.deepcopy(first() if doc is None else dict(doc.get(key) or {}))
        out = edit(values)
        if session.save_doc(name, {key: values}, version):
            return out, doc is None
    raise BackendUnavailable(f"{what} changed {SWAP_TRIES} times while saving; try again")
