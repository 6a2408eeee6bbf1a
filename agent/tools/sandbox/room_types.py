"""The values a sandbox room hands out: its event callback, manifests, text windows, and its digest cache's key."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EventCallback = Callable[[str, dict[str, Any]], None]
Manifest = dict[str, str]

_RACY_NS = 100_000_000  # coarser than any file-system timestamp tick we know of
_CacheKey = tuple[int, int, int, int]


@dataclass(frozen=True)
class TextWindow:
    """A slice of a text file: `text` starts at character `offset` of `total_chars`."""

    text: str
    offset: int
    total_chars: int

    @property
    def end(self) -> int:
        """Character offset just past this slice (where the next read starts)."""
        return self.offset + len(self.text)

    @property
    def truncated(self) -> bool:
        """Whether the file goes on after this slice."""
        return self.end < self.total_chars
