"""L1: the in-process session cache, a bounded LRU with a time-to-live, safe across threads."""

from __future__ import annotations

import builtins
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from agent.session.session import ChatSession


class MemorySessionStore:
    """Bounded LRU of sessions keyed by (tenant_id, session_id); entries older than the TTL are misses.

    Copies go in and out, so a caller mutating its session never changes the cached one behind the
    manager's back. `clock` is injectable so tests can move time without sleeping.
    """

    name = "L1"

    def __init__(
        self,
        max_entries: int = 1024,
        ttl_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], tuple[float, ChatSession]] = OrderedDict()
        self._off = False

    def off(self) -> None:
        """Keep nothing from now on (a process whose sessions change under it in other processes):
        every read misses, and a put copies nothing."""
        self._off = True
        self.clear()

    def _fresh(self, stored_at: float) -> bool:
        return self.ttl_seconds <= 0 or self._clock() - stored_at < self.ttl_seconds

    def get(self, tenant_id: str, session_id: str) -> ChatSession | None:
        """The cached copy, or None when absent or older than the TTL."""
        key = (tenant_id, session_id)
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            if not self._fresh(item[0]):
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return item[1].model_copy(deep=True)

    def put(self, session: ChatSession) -> None:
        """Cache a copy, evicting the least recently used entry beyond `max_entries`."""
        if self._off:
            return
        key = session.key()
        with self._lock:
            self._items[key] = (self._clock(), session.model_copy(deep=True))
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def delete(self, tenant_id: str, session_id: str) -> None:
        """Drop the cached copy."""
        with self._lock:
            self._items.pop((tenant_id, session_id), None)

    def list(self, tenant_id: str, user_id: str | None = None) -> builtins.list[ChatSession]:
        """Fresh cached sessions of the tenant (and user)."""
        with self._lock:
            return [
                s.model_copy(deep=True)
                for (t, _), (at, s) in self._items.items()
                if t == tenant_id and self._fresh(at) and (user_id is None or s.user_id == user_id)
            ]

    def clear(self) -> None:
        """Forget everything (e.g. a process that must re-read from the durable layers)."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
