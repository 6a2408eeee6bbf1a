"""The background retrier: while a process owes a layer writes, try to replay them at an interval.

A run that goes on for minutes after an outage must not wait for its next save (or its end) to
bring SQL and Redis up to date. `Retrier.start()` (called whenever a debt is recorded) starts one
daemon thread, if none runs, which calls `attempt()` every `interval_s` seconds; it stops as soon
as `attempt()` says nothing is owed any more, and never keeps the process alive (a killed or
exiting process leaves its debts in the durable outbox for the next one).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("agentrt.sessions")


class Retrier:
    """One daemon thread per owner, alive only while `attempt()` returns True (something still owed)."""

    def __init__(self, attempt: Callable[[], bool], interval_s: float, name: str = "agentrt-outbox-retry") -> None:
        self.attempt = attempt
        self.interval_s = max(0.05, interval_s)
        self.name = name
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._kicked = False
        """A debt was recorded since the current attempt began (it may not have seen it)."""

    def start(self) -> None:
        """Make sure the thread runs (a no-op while it does)."""
        with self._lock:
            self._kicked = True
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread after its current attempt (tests, a closing process)."""
        self._stop.set()

    @property
    def running(self) -> bool:
        """Whether the thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                self._kicked = False
            try:
                owed = self.attempt()
            except Exception as err:  # a bug here must not kill retrying for the rest of the process
                log.warning("replaying what the session layers missed failed: %s", err)
                owed = True
            if not owed:
                with self._lock:
                    if self._kicked:
                        continue  # a debt recorded while this attempt ran: try again
                    self._thread = None
                return
