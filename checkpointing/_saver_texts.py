"""Long texts stored ahead of the checkpoints that hold them: `put_text` stores a text now as an
item of the thread's run log (so a tool's result outlives a crash before its checkpoint is
written) and `get_text` reads it back, verified against its reference.

A mixin of `JsonlCheckpointSaver` (the saver gives the session stores, its lock and documents).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from langchain_core.runnables import RunnableConfig

from checkpointing._saver_docs import DocumentBuilder
from checkpointing._saver_ids import fencing_token
from checkpointing._saver_refs import ITEM_KEY
from checkpointing._saver_spill import TEXT_MIN
from checkpointing._saver_store import SessionStore
from checkpointing.exceptions import CorruptCheckpointError, InvalidIdError


class StoredTexts:
    """Mixin: `put_text` and `get_text` (the saver provides the members below)."""

    _lock: AbstractContextManager[Any]
    docs: DocumentBuilder

    def _store(self, tenant: str, thread: str) -> SessionStore:
        raise NotImplementedError

    def _ids(self, config: RunnableConfig) -> dict[str, Any]:
        raise NotImplementedError

    def put_text(self, config: RunnableConfig, text: str) -> dict[str, str] | None:
        """Store a long text now as an item of the thread's run log (`config` names thread, tenant
        and run), so that checkpoints and writes holding it later reference this one copy, and
        return its reference (None for a text too short to be an item: keep it inline).

        For what must outlive a crash before the checkpoint that will hold it is written (a tool's
        result, recorded before the tool's writes): durable per the fsync policy like a write."""
        if len(text) < TEXT_MIN:
            return None
        ids = self._ids(config)
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            new: dict[str, bytes] = {}
            ref = self.docs.text_ref(text, store, new)
            wait = store.append(ids["run"], None, items=new, token=fencing_token(config)) if new else None
        if wait is not None:
            wait()
        return ref

    def get_text(self, config: RunnableConfig, ref: Mapping[str, Any]) -> str | None:
        """The text `put_text` returned `ref` for (verified), or None when the thread stores no such
        item (it never reached the disk)."""
        ids = self._ids(config)
        h = ref.get(ITEM_KEY) if isinstance(ref, Mapping) else None
        if not isinstance(h, str):
            raise InvalidIdError(f"not a stored text reference: {str(ref)[:80]!r}")
        with self._lock:
            store = self._store(ids["tenant"], ids["thread"])
            if h not in store.index.items:
                return None
            value = store.item(h)
        if not isinstance(value, str) or self.docs.text_hash(value) != h:
            raise CorruptCheckpointError(str(store.runs_dir), 0, f"stored text {h} does not match its reference")
        return value
