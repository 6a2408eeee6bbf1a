"""L2: sessions in Redis as JSON values under tenant-carrying keys, with a TTL from the session's expiry.

Key: `<prefix>:<tenant_id>:session:<session_id>` (default prefix `agentrt`). Tenant and session ids
are validated (no `:` or glob characters), so one tenant's key can never match another's pattern.
Every value read back is decoded into `ChatSession` and checked against the key's tenant.
The client (and redis-py) is made on first use: a command that never reads the layer never loads it.
"""

from __future__ import annotations

import builtins
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent.core.errors import BackendUnavailable
from agent.session.session import ChatSession, SessionDocumentCorrupt, SessionStatus, utcnow
from checkpointing.ids import validate_id

if TYPE_CHECKING:
    import redis

DEFAULT_PREFIX = "agentrt"
METRICS_SDK = "opentelemetry.sdk.metrics"
"""The OpenTelemetry SDK module redis-py loads, when it is installed, for metrics agentrt never turns on."""


def load_redis_without_metrics() -> None:
    """Load redis-py as if the OpenTelemetry SDK were not installed (a case redis-py supports: it
    is an optional extra), for a one-shot read command, which never turns redis-py's metrics on:
    the SDK's metrics are about a fifth of what loading redis-py costs. Later imports of the SDK in
    the process work as usual; redis-py's own metrics stay off in it."""
    if "redis" in sys.modules or METRICS_SDK in sys.modules:
        return
    sys.modules[METRICS_SDK] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        import redis  # noqa: F401
    finally:
        if METRICS_SDK in sys.modules and sys.modules[METRICS_SDK] is None:
            del sys.modules[METRICS_SDK]


class RedisSessionStore:
    """Session documents in Redis; every Redis failure is raised as `BackendUnavailable` (cause kept)."""

    name = "L2"

    def __init__(
        self,
        url: str | None = None,
        client: redis.Redis | None = None,
        key_prefix: str = DEFAULT_PREFIX,
        min_ttl_seconds: int = 60,
        ended_ttl_seconds: int = 3600,
        socket_timeout: float = 2.0,
    ) -> None:
        if client is None and url is None:
            raise ValueError("RedisSessionStore needs a url or a client")
        self._client = client
        self._url = url
        self._socket_timeout = socket_timeout
        self.key_prefix = key_prefix
        self.min_ttl_seconds = min_ttl_seconds
        self.ended_ttl_seconds = ended_ttl_seconds

    @property
    def client(self) -> redis.Redis:
        """The Redis client (made, and redis-py loaded, on first use)."""
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(
                str(self._url),
                socket_timeout=self._socket_timeout,
                socket_connect_timeout=self._socket_timeout,
                decode_responses=False,
            )
        return self._client

    def key(self, tenant_id: str, session_id: str) -> str:
        """The Redis key of one session."""
        validate_id(tenant_id, "tenant id")
        validate_id(session_id, "session id")
        return f"{self.key_prefix}:{tenant_id}:session:{session_id}"

    def ttl_for(self, session: ChatSession) -> int:
        """Seconds the value may live: until the session's expiry (at least `min_ttl_seconds`)."""
        if session.status in (SessionStatus.ENDED, SessionStatus.EXPIRED):
            return self.ended_ttl_seconds
        at = session.expires_at()
        if at is None or session.status is not SessionStatus.ACTIVE:
            # PAUSED sessions wait for a resume; keep them as long as an idle ACTIVE one would live.
            minutes = session.expire_minutes if session.expire_minutes > 0 else 24 * 60
            return max(self.min_ttl_seconds, math.ceil(minutes * 60))
        return max(self.min_ttl_seconds, math.ceil((at - utcnow()).total_seconds()))

    def _fail(self, what: str, err: Exception) -> BackendUnavailable:
        return BackendUnavailable(
            f"Redis {what} failed ({type(err).__name__}: {err}); check that Redis is running and "
            "AGENTRT_REDIS_URL points at it"
        )

    def get(self, tenant_id: str, session_id: str) -> ChatSession | None:
        """The session under this tenant's key, or None."""
        key = self.key(tenant_id, session_id)
        try:
            raw = self.client.get(key)
        except _redis_error() as err:
            raise self._fail("GET", err) from err
        if raw is None:
            return None
        session = _decode(raw, key)
        if session.tenant_id != tenant_id or session.session_id != session_id:
            return None
        return session

    def put(self, session: ChatSession) -> None:
        """SET the session document with its TTL."""
        key = self.key(session.tenant_id, session.session_id)
        try:
            self.client.set(key, session.to_json().encode("utf-8"), ex=self.ttl_for(session))
        except _redis_error() as err:
            raise self._fail("SET", err) from err

    def put_if_absent(self, session: ChatSession) -> None:
        """SET NX: fill the cache after a read without overwriting a copy a writer put meanwhile."""
        key = self.key(session.tenant_id, session.session_id)
        try:
            self.client.set(key, session.to_json().encode("utf-8"), ex=self.ttl_for(session), nx=True)
        except _redis_error() as err:
            raise self._fail("SET NX", err) from err

    def delete(self, tenant_id: str, session_id: str) -> None:
        """DEL the session's key."""
        try:
            self.client.delete(self.key(tenant_id, session_id))
        except _redis_error() as err:
            raise self._fail("DEL", err) from err

    def erase(self, keys: Sequence[str], patterns: Sequence[str] = ()) -> int:
        """DEL `keys` and every key matching one of `patterns` (SCAN); returns how many were deleted.
        Patterns are built from validated ids only (no glob character of a caller's)."""
        try:
            found = builtins.list(keys)
            for pattern in patterns:
                found += [_text(k) for k in self.client.scan_iter(match=pattern, count=500)]
            return int(self.client.delete(*found)) if found else 0
        except _redis_error() as err:
            raise self._fail("DEL", err) from err

    def list(self, tenant_id: str, user_id: str | None = None) -> builtins.list[ChatSession]:
        """The tenant's sessions held in Redis (SCAN over the tenant's key pattern)."""
        validate_id(tenant_id, "tenant id")
        pattern = f"{self.key_prefix}:{tenant_id}:session:*"
        out: builtins.list[ChatSession] = []
        try:
            keys = builtins.list(self.client.scan_iter(match=pattern, count=500))
            values = self.client.mget(keys) if keys else []
        except _redis_error() as err:
            raise self._fail("SCAN", err) from err
        for key, raw in zip(keys, values, strict=True):
            if raw is None:
                continue
            session = _decode(raw, key.decode() if isinstance(key, bytes) else str(key))
            if session.tenant_id == tenant_id and (user_id is None or session.user_id == user_id):
                out.append(session)
        return out

    def ping(self) -> bool:
        """Whether Redis answers."""
        try:
            return bool(self.client.ping())
        except _redis_error():
            return False


def _redis_error() -> type[Exception]:
    """redis-py's base error (a handler's class is looked up only when an error reaches it, after
    the client, and so redis-py, is loaded)."""
    from redis.exceptions import RedisError

    return RedisError


def _text(key: Any) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)


def _decode(raw: Any, key: str) -> ChatSession:
    try:
        return ChatSession.from_json(raw)
    except ValueError as err:
        raise SessionDocumentCorrupt(
            f"Redis value at {key} is not a valid session document ({err}); delete the key, the "
            "durable layer will refill it"
        ) from err
