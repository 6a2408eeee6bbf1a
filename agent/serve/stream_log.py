"""A run's server-sent events, kept in the record store for `Last-Event-ID` replays.

Every event a run streams gets the next id of the run (1, 2, ...) and is appended, as sent, to the
run's served stream (`checkpointing.store.base.served_stream`: a file `served/<run>.jsonl` in the
session folder, or rows of the PostgreSQL store) with the store's non-durable policy: no fsync
per event; a machine crash may lose the tail, a server restart does not. The last record marks
the end of the stream. A stream is removed when it is read (a join) more than `serve.stream_ttl_s`
after its last event, and with its thread.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from agent.core.config import AgentSettings
from agent.session.record_store import session_streams
from checkpointing.records import encode_record
from checkpointing.store.base import SessionStreams, served_stream

log = logging.getLogger("agentrt.serve")
END_KEY = "end"


@dataclass
class Replay:
    """What the store holds of a run's stream."""

    events: list[tuple[int, str, Any]] = field(default_factory=list)
    """(id, event name, data) in order."""
    ended: bool = False
    last_at: float = 0.0


class StreamLog:
    """The served stream of one run."""

    def __init__(self, settings: AgentSettings, tenant_id: str, thread_id: str, run_id: str) -> None:
        self.ttl_s = settings.serve.stream_ttl_s
        self.name = served_stream(run_id)
        self._streams: SessionStreams = session_streams(settings, tenant_id, thread_id, "never")
        self.failed = False

    def reset(self) -> None:
        """Start the stream empty (a run continued under the same id starts its own)."""
        try:
            if self._streams.head(self.name)[0]:
                self._streams.replace(self.name, [])
        except Exception as err:
            self.failed = True
            log.warning("could not start the replay copy %s: %s", self.name, err)

    def append(self, events: list[tuple[int, str, Any]], end: bool = False) -> None:
        """Append events (and, with `end`, the end mark); a store error is logged, never raised:
        the live stream goes on, only its replay is short."""
        if self.failed:
            return
        now = time.time()
        frames = [encode_record({"i": i, "e": name, "d": data, "t": now}) for i, name, data in events]
        if end:
            frames.append(encode_record({END_KEY: True, "t": now}))
        if not frames:
            return
        try:
            self._streams.append(self.name, frames, "never", None)
        except Exception as err:  # the run must not fail because its replay copy could not be kept
            self.failed = True
            log.warning("could not keep the events of %s for replays: %s", self.name, err)

    def read(self, after: int = 0) -> Replay | None:
        """The events after id `after`; None when the stream is unknown or expired (then removed)."""
        scan = self._streams.scan(self.name)
        if not scan.records:
            return None
        out = Replay()
        for _, body in scan.records:
            rec = orjson.loads(body)
            out.last_at = float(rec.get("t") or out.last_at)
            if rec.get(END_KEY):
                out.ended = True
            elif int(rec["i"]) > after:
                out.events.append((int(rec["i"]), str(rec["e"]), rec.get("d")))
        if out.last_at + self.ttl_s < time.time():
            self.remove()
            return None
        return out

    def tail(self, start: int = 0) -> tuple[list[tuple[int, str, Any]], bool, int]:
        """The events appended from position `start`, whether the end mark is among them, and the
        position to read from next (a run another server holds, followed as it goes)."""
        scan = self._streams.scan(self.name, start)
        events: list[tuple[int, str, Any]] = []
        ended = False
        for _, body in scan.records:
            rec = orjson.loads(body)
            if rec.get(END_KEY):
                ended = True
            else:
                events.append((int(rec["i"]), str(rec["e"]), rec.get("d")))
        return events, ended, scan.good

    def remove(self) -> None:
        """Drop the stream."""
        self._streams.replace(self.name, [])

    def remove_quietly(self) -> None:
        """Drop the stream (a rolled-back run's); a store error is logged, never raised."""
        try:
            self.remove()
        except Exception as err:
            log.warning("could not remove the replay copy %s: %s", self.name, err)


def parse_event_id(value: str | None) -> int:
    """A `Last-Event-ID` as the id to replay after (0: from the start; an unreadable one too)."""
    try:
        return max(0, int(str(value or "0").strip()))
    except ValueError:
        return 0
