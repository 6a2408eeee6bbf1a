"""The asyncio face of a run (a worker thread pumps the sync stream) and collecting a stream's `final`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from agent.core.results import RunEvent, RunResult


async def in_thread(make: Callable[[], Iterator[RunEvent]]) -> AsyncIterator[RunEvent]:
    """Iterate `make()` in a worker thread, handing each event (or its error) to the awaiting side."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def pump() -> None:
        try:
            for ev in make():
                loop.call_soon_threadsafe(queue.put_nowait, ("event", ev))
        except BaseException as err:  # handed to the awaiting side, which re-raises it
            loop.call_soon_threadsafe(queue.put_nowait, ("error", err))
        else:
            loop.call_soon_threadsafe(queue.put_nowait, ("done", None))

    worker = threading.Thread(target=pump, name="agentrt-run", daemon=True)
    worker.start()
    while True:
        kind, value = await queue.get()
        if kind == "event":
            yield value
        elif kind == "error":
            raise value
        else:
            return


def final(events: Iterator[RunEvent]) -> RunResult:
    """Run a stream to its end and return the result its `final` event carries."""
    data: dict[str, Any] = {}
    for ev in events:
        if ev.kind == "final":
            data = ev.data
    data.pop("note", None)
    return RunResult(**data)
