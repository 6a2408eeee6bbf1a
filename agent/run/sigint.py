"""Holding a Ctrl-C back while a few statements that must land together run."""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any


class HeldSigint:
    """Within `with`, a SIGINT is noted, not raised; `deliver()` raises it afterwards.

    A turn start saves the session (its run RUNNING) and then makes the recorder that closes the run
    if it is interrupted. A `KeyboardInterrupt` landing between the two would leave a RUNNING run
    nobody closes under a message saying no run started; held here, it lands either before the save
    (nothing stored) or after the recorder exists (the run is closed as INTERRUPTED).

    Only the main thread receives signals: elsewhere (the server's workers) this does nothing.
    """

    def __init__(self) -> None:
        self._previous: Any = None
        self._caught = False
        self._active = False

    def __enter__(self) -> HeldSigint:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._note)
            self._active = True
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self._caught = True

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        if self._active:
            signal.signal(signal.SIGINT, self._previous)
            self._active = False

    def deliver(self) -> None:
        """Act on a SIGINT that came while held, as the handler in place before would have."""
        if self._caught:
            self._caught = False
            if callable(self._previous):
                self._previous(signal.SIGINT, None)  # Python's default raises KeyboardInterrupt
