"""ToolResultStore: every tool result in full, by tool_call_id, so compression never loses one.

The graph state's `tool_result_store` channel (an appender) holds one `ToolResultEntry` per tool
call. Small results are inline; a result whose UTF-8 form is larger than `inline_max` bytes lives
in the content-addressed BlobStore and the entry holds only `{"$blob": "sha256:...", "size": N}`.
Sizes and offsets are in characters (Python str indices), the unit `read_tool_result` pages by.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

from agent.core.errors import BackendUnavailable, DataCorrupt, ToolError, UnknownToolResult
from checkpointing.blobs import Blobs, is_blob_ref
from checkpointing.exceptions import BlobCorruptError, BlobMissingError
from checkpointing.ids import shown

DEFAULT_PREVIEW_CHARS = 200
DEFAULT_MAX_READ_LIMIT = 20_000


class ToolResultEntry(TypedDict, total=False):
    """One archived tool result as it is kept in the `tool_result_store` channel."""

    tool_call_id: str
    """The id of the tool call this is the result of (the key; a later entry for it wins)."""
    tool_name: str
    """The tool that produced it."""
    size: int
    """Length of the full result in characters."""
    content: str
    """The full result, when it is small enough to be inline (exclusive with `blob`)."""
    blob: dict[str, Any]
    """Blob reference `{"$blob": "sha256:<hex>", "size": <bytes>}` of the UTF-8 result."""
    preview: str
    """The first characters of the result, for listings and pointers."""
    created_at: str
    """When the result was archived (UTC, ISO 8601)."""


def make_entry(
    tool_call_id: str,
    tool_name: str,
    content: str,
    blobs: Blobs | None,
    inline_max: int,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
) -> ToolResultEntry:
    """The entry for one tool result; stores the content as a blob if it exceeds `inline_max` bytes."""
    entry: ToolResultEntry = {
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "size": len(content),
        "preview": content[:preview_chars],
        "created_at": datetime.now(UTC).isoformat(),
    }
    data = content.encode("utf-8")
    if blobs is not None and len(data) > inline_max:
        entry["blob"] = blobs.ref_obj(data)
    else:
        entry["content"] = content
    return entry


@dataclass(frozen=True)
class ToolResultSlice:
    """A range `[offset, end)` of a stored result; `next_offset` is None at the end."""

    tool_call_id: str
    tool_name: str
    text: str
    offset: int
    end: int
    total: int

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts, or None if this slice reaches the end."""
        return self.end if self.end < self.total else None


def _check_entry(raw: Any) -> ToolResultEntry:
    if not isinstance(raw, dict) or not isinstance(raw.get("tool_call_id"), str):
        raise DataCorrupt(f"malformed tool_result_store entry {str(raw)[:120]!r}: it has no tool_call_id")
    has_content = isinstance(raw.get("content"), str)
    has_blob = is_blob_ref(raw.get("blob"))
    if has_content == has_blob:
        raise DataCorrupt(
            f"tool_result_store entry {shown(raw['tool_call_id'])} must hold exactly one of content / blob; "
            "the checkpoint is damaged, run `agentrt doctor`"
        )
    entry: ToolResultEntry = {
        "tool_call_id": raw["tool_call_id"],
        "tool_name": str(raw.get("tool_name", "")),
        "size": int(raw["size"]) if isinstance(raw.get("size"), int) else len(raw.get("content", "")),
        "preview": str(raw.get("preview", "")),
        "created_at": str(raw.get("created_at", "")),
    }
    if has_content:
        entry["content"] = raw["content"]
    else:
        entry["blob"] = {"$blob": raw["blob"]["$blob"], "size": raw["blob"]["size"]}
    return entry


class ToolResultStore:
    """Full tool results by tool_call_id, read back by character range."""

    def __init__(self, blobs: Blobs | None = None, max_read_limit: int = DEFAULT_MAX_READ_LIMIT) -> None:
        self.blobs = blobs
        self.max_read_limit = max_read_limit
        self._entries: dict[str, ToolResultEntry] = {}
        self._loaded: dict[str, str] = {}

    @classmethod
    def from_entries(
        cls,
        entries: Iterable[Any],
        blobs: Blobs | None = None,
        max_read_limit: int = DEFAULT_MAX_READ_LIMIT,
    ) -> ToolResultStore:
        """The store for a `tool_result_store` channel value (later entries for an id win)."""
        store = cls(blobs, max_read_limit)
        for raw in entries:
            store.add_entry(raw)
        return store

    def add_entry(self, raw: Any) -> ToolResultEntry:
        """Add (or replace) one entry, checked against the closed entry shape."""
        entry = _check_entry(raw)
        self._entries[entry["tool_call_id"]] = entry
        self._loaded.pop(entry["tool_call_id"], None)
        return entry

    def add(self, tool_call_id: str, tool_name: str, content: str, inline_max: int = 1 << 62) -> ToolResultEntry:
        """Archive a result directly (blob-backed above `inline_max` bytes); returns its entry."""
        return self.add_entry(make_entry(tool_call_id, tool_name, content, self.blobs, inline_max))

    def __contains__(self, tool_call_id: object) -> bool:
        return tool_call_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def ids(self) -> list[str]:
        """Every stored tool_call_id, oldest first."""
        return list(self._entries)

    def info(self, tool_call_id: str) -> ToolResultEntry:
        """The entry of `tool_call_id` (raises ToolError naming how to find ids if unknown)."""
        entry = self._entries.get(tool_call_id)
        if entry is None:
            known = ", ".join(list(self._entries)[-10:]) or "none yet"
            raise UnknownToolResult(
                f"no archived tool result with tool_call_id {shown(tool_call_id)}. Use the call_id shown in an "
                f"archived tool message (the text 'call_id=...'); most recent ids: {known}"
            )
        return entry

    def get(self, tool_call_id: str) -> str:
        """The full result text of `tool_call_id` (blobs are read once and verified)."""
        entry = self.info(tool_call_id)
        if "content" in entry:
            return entry["content"]
        text = self._loaded.get(tool_call_id)
        if text is None:
            if self.blobs is None:
                raise BackendUnavailable(
                    f"tool result {shown(tool_call_id)} is in a blob but this store has no BlobStore; "
                    "build it with ToolResultStore.from_entries(entries, blobs)"
                )
            ref = entry["blob"]["$blob"]
            try:
                text = self.blobs.get(ref).decode("utf-8")
            except BlobMissingError as err:  # most often the blob volume is not mounted
                raise BackendUnavailable(f"tool result {shown(tool_call_id)} cannot be read: {err}") from err
            except BlobCorruptError as err:
                raise DataCorrupt(f"tool result {shown(tool_call_id)} cannot be read: {err}") from err
            self._loaded[tool_call_id] = text
        return text

    def read(self, tool_call_id: str, offset: int = 0, limit: int = 2000) -> ToolResultSlice:
        """Characters `[offset, offset + limit)` of the result, with bounds checked."""
        entry = self.info(tool_call_id)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ToolError(f"offset must be an integer >= 0, got {offset!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= self.max_read_limit:
            raise ToolError(f"limit must be an integer from 1 to {self.max_read_limit}, got {limit!r}")
        text = self.get(tool_call_id)
        total = len(text)
        if offset > total:
            raise ToolError(
                f"offset {offset} is past the end of tool result {shown(tool_call_id)} ({total} characters); "
                f"use an offset from 0 to {total}"
            )
        end = min(total, offset + limit)
        return ToolResultSlice(tool_call_id, entry.get("tool_name", ""), text[offset:end], offset, end, total)
