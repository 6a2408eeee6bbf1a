"""Holding a Ctrl-C back while a few statements that must land together run."""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any


class HeldSigint:
    """From `with` on, a SIGINT is noted, not raised, until `deliver()`, which puts the handler back
    and raises it then; a block left by an exception puts the handler back (the exception is the news).

    A turn start writes the new session's header, saves the session (its run RUNNING) and then makes
    the recorder that closes the run if it is interrupted. A `KeyboardInterrupt` landing between
    would leave a session or a RUNNING run under a message saying no run started; held, it lands
    either before anything is stored or at `deliver()`, called inside the `try` that closes the run
    as INTERRUPTED (so not even the moment between the block's end and that `try` is open).

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
        if kind is not None:
            self._restore()

    def _restore(self) -> None:
        if self._active:
            signal.signal(signal.SIGINT, self._previous)
            self._active = False

    def deliver(self) -> None:
        """Put the handler back, then act on a SIGINT that came while held, as it would have."""
        self._restore()
        if self._caught:
            self._caught = False
            if callable(self._previous):
                self._previous(signal.SIGINT, None)  # Python's default raises KeyboardInterrupt
