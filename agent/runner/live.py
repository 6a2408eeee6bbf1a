"""Live events of a turn that a Celery worker runs, for `agentrt serve` to stream to its clients.

Each turn the server submits is marked `live` in the session's inbox (agent/session/inbox.py); the
worker that runs it appends every `RunEvent` of the run (the raw graph chunks included, as JSON)
to a Redis stream keyed by tenant, session and turn, then an `end` record once the turn is settled
in the inbox. A turn answered after a pause, or resumed after a crash or a stopped worker,
appends to the same stream: a reader starts after the last record it has seen.

A cancel is a flag beside the stream: the worker checks it before the turn starts and after every
node, closes the run at that step boundary (left resumable, as a cancel in the server process
does) and settles the turn as FAILED with `run_status: INTERRUPTED`. A Celery revoke would not do:
an acks-late task revoked before it starts leaves its turn pending in the inbox, and one revoked
with `terminate` kills the pool process mid-step.

Keys start with `workers.key_prefix` and expire after `workers.live_events_ttl_s`.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from agent.core.config import AgentSettings
from agent.core.errors import BackendUnavailable, ConfigError
from agent.core.results import RunEvent, jsonable

END = "end"
MAX_EVENTS = 20_000  # per turn; older ones are trimmed (a reader that far behind re-reads the state)


def redis_url(settings: AgentSettings) -> str:
    """The Redis that carries live events: `persistence.redis_url`, else a Redis result backend."""
    url = settings.persistence.redis_url or settings.workers.result_backend or ""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(
            "runs on the workers stream their events through Redis: set persistence.redis_url "
            "(or AGENTRT_REDIS_URL), e.g. redis://127.0.0.1:6379/0"
        )
    return url


CLEAN = b"clean"
"""The cancel flag of a turn that may stop only where a new turn can follow (`multitask_strategy: interrupt`)."""
ROLLBACK = b"rollback"
"""The cancel flag of a turn whose run is to be rolled back once stopped (`multitask_strategy: rollback`)."""


class LiveChannel:
    """The live-event streams and cancel flags of submitted turns, in Redis."""

    def __init__(self, settings: AgentSettings) -> None:
        self.prefix = settings.workers.key_prefix
        self.ttl_s = int(settings.workers.live_events_ttl_s)
        self._redis = redis.Redis.from_url(redis_url(settings))

    def _key(self, kind: str, tenant_id: str, session_id: str, turn_id: str) -> str:
        return f"{self.prefix}live:{kind}:{tenant_id}:{session_id}:{turn_id}"

    def publish(self, tenant_id: str, session_id: str, turn_id: str, kind: str, data: Any) -> None:
        """Append one event (`data` already plain JSON) to the turn's stream."""
        key = self._key("events", tenant_id, session_id, turn_id)
        body = json.dumps({"kind": kind, "data": data}, ensure_ascii=False, separators=(",", ":"), default=repr)
        try:
            pipe = self._redis.pipeline(transaction=False)
            pipe.xadd(key, {"e": body}, maxlen=MAX_EVENTS, approximate=True)
            pipe.expire(key, self.ttl_s)
            pipe.execute()
        except redis.RedisError as err:
            raise BackendUnavailable(
                f"cannot publish live events to Redis ({err}); check persistence.redis_url"
            ) from err

    def last_id(self, tenant_id: str, session_id: str, turn_id: str) -> str:
        """The id of the turn's last record ("0-0" for none): read after it to see only what comes next."""
        got = self._call(self._redis.xrevrange, self._key("events", tenant_id, session_id, turn_id), count=1)
        return _text(got[0][0]) if got else "0-0"

    def read(
        self, tenant_id: str, session_id: str, turn_id: str, after: str, block_ms: int | None
    ) -> list[tuple[str, str, Any]]:
        """The records after `after` as (id, kind, data), waiting up to `block_ms` for the first one
        (None: not at all; Redis would take 0 as "forever")."""
        key = self._key("events", tenant_id, session_id, turn_id)
        got = self._call(self._redis.xread, {key: after}, count=500, block=block_ms or None)
        out: list[tuple[str, str, Any]] = []
        for _, records in got or []:
            for rid, fields in records:
                rec = json.loads(fields[b"e"])
                out.append((_text(rid), str(rec["kind"]), rec.get("data")))
        return out

    def request_cancel(
        self, tenant_id: str, session_id: str, turn_id: str, clean: bool = False, rollback: bool = False
    ) -> None:
        """Ask the worker running the turn to stop at its next step boundary (or not to start it);
        `clean`: only at a step a new turn can follow (never overrides a plain cancel); `rollback`:
        at the next step, and the worker then moves the session back to before the turn's run."""
        key = self._key("cancel", tenant_id, session_id, turn_id)
        if rollback:
            self._call(self._redis.set, key, ROLLBACK, ex=self.ttl_s)
        elif clean:
            self._call(self._redis.set, key, CLEAN, ex=self.ttl_s, nx=True)
        else:
            self._call(self._redis.set, key, b"1", ex=self.ttl_s)

    def cancel_mode(self, tenant_id: str, session_id: str, turn_id: str) -> str | None:
        """None (not cancelled), `clean` (stop at a step a new turn can follow), `now` (the next
        step) or `rollback` (the next step, then roll the run back)."""
        value = self._call(self._redis.get, self._key("cancel", tenant_id, session_id, turn_id))
        if value is None:
            return None
        return {CLEAN: "clean", ROLLBACK: "rollback"}.get(value, "now")

    def clear_cancel(self, tenant_id: str, session_id: str, turn_id: str) -> None:
        """Forget an earlier cancel (the turn is submitted again: an answer to its approval)."""
        self._call(self._redis.delete, self._key("cancel", tenant_id, session_id, turn_id))

    def cancel_requested(self, tenant_id: str, session_id: str, turn_id: str) -> bool:
        """Whether a client cancelled the turn."""
        return bool(self._call(self._redis.exists, self._key("cancel", tenant_id, session_id, turn_id)))

    def close(self) -> None:
        """Release the connection pool."""
        self._redis.close()

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except redis.RedisError as err:
            raise BackendUnavailable(
                f"Redis is unreachable for live events ({err}); check persistence.redis_url"
            ) from err


def encode_event(ev: RunEvent) -> tuple[str, Any]:
    """A RunEvent as (kind, plain JSON data), graph chunks included."""

    return ev.kind, jsonable(ev.data)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
