"""`RedisLease`: a session's lease as a Redis key with an expiry, for processes on several hosts."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agent.core.errors import BackendUnavailable, LeaseHeld
from agent.session.lease import DEFAULT_TTL_S, LeaseGrant, _check_ids, _lost, make_holder

if TYPE_CHECKING:  # redis loads when a Redis lease is made: a file lease (the default) never needs it
    import redis


DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"

# KEYS[1] lease key, KEYS[2] token counter. ARGV[1] holder, ARGV[2] ttl ms, ARGV[3] token floor.
# Checking, counting and setting in one script keeps tokens in grant order: a later grant always
# carries a higher token, which two separate round trips could not promise.
_ACQUIRE = """
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur, redis.call('PTTL', KEYS[1])} end
local t = redis.call('INCR', KEYS[2])
local floor = tonumber(ARGV[3])
if t <= floor then
  t = floor + 1
  redis.call('SET', KEYS[2], t)
end
local v = t .. '|' .. ARGV[1]
redis.call('SET', KEYS[1], v, 'NX', 'PX', ARGV[2])
return {1, v, tonumber(ARGV[2])}
"""

# ARGV[1] our value, ARGV[2] ttl ms, ARGV[3] our token. A key that lapsed while nobody else took
# it (the counter still shows our token) is taken back: no newer grant exists that we could race.
_EXTEND = """
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, cur, tonumber(ARGV[2])}
end
if (not cur) and redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, ARGV[1], tonumber(ARGV[2])}
end
if cur then return {0, cur, redis.call('PTTL', KEYS[1])} end
return {0, false, -2}
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisLease:
    """A lease shared by every host that reaches one Redis.

    Keys: `<prefix>agentrt:<tenant>:lease:<session>` (value `<token>|<holder>`) and
    `...:<session>:token` (the counter, never expires). `key_prefix` isolates tests.
    """

    def __init__(self, client: redis.Redis | None = None, url: str | None = None, key_prefix: str = "") -> None:
        import redis

        if client is None:
            client = redis.Redis.from_url(
                url or os.environ.get("AGENTRT_REDIS_URL", DEFAULT_REDIS_URL),
                socket_timeout=5.0,
                socket_connect_timeout=5.0,
            )
        self.client = client
        self.key_prefix = key_prefix
        self._acquire = client.register_script(_ACQUIRE)
        self._extend = client.register_script(_EXTEND)
        self._release = client.register_script(_RELEASE)

    def lease_key(self, tenant: str, session_id: str) -> str:
        """The Redis key of the lease of a session."""
        return f"{self.key_prefix}agentrt:{tenant}:lease:{session_id}"

    def token_key(self, tenant: str, session_id: str) -> str:
        """The Redis key of a session's fencing-token counter."""
        return self.lease_key(tenant, session_id) + ":token"

    def _keys(self, tenant: str, session_id: str) -> list[str]:
        return [self.lease_key(tenant, session_id), self.token_key(tenant, session_id)]

    def acquire(
        self,
        tenant: str,
        session_id: str,
        holder: str | None = None,
        ttl_s: float = DEFAULT_TTL_S,
        token_floor: int | None = None,
    ) -> LeaseGrant:
        """`SET NX PX` in a script with the token `INCR`; raises `LeaseHeld` when taken."""
        _check_ids(tenant, session_id, ttl_s)
        holder = holder or make_holder()
        keys = self._keys(tenant, session_id)
        ok, value, pttl = self._run(self._acquire, keys, [holder, _ms(ttl_s), token_floor or 0])
        token, current = _parse_value(value)
        if not ok:
            raise LeaseHeld(session_id, current, _expiry(pttl))
        return LeaseGrant(token, holder, _expiry(pttl) or time.time() + ttl_s, tenant, session_id, ttl_s)

    def extend(self, grant: LeaseGrant, ttl_s: float | None = None) -> LeaseGrant:
        """Compare-and-pexpire; raises `LeaseHeld` naming the new holder when the lease was lost."""
        ttl = grant.ttl_s if ttl_s is None else ttl_s
        keys = self._keys(grant.tenant, grant.session_id)
        ok, value, pttl = self._run(self._extend, keys, [_value(grant), _ms(ttl), str(grant.token)])
        if not ok:
            holder = _parse_value(value)[1] if value else None
            raise _lost(grant, holder, _expiry(pttl))
        return replace(grant, expires_at=_expiry(pttl) or time.time() + ttl, ttl_s=ttl)

    def release(self, grant: LeaseGrant) -> None:
        """Compare-and-delete: removes the key only if it still holds this grant."""
        self._run(self._release, [self.lease_key(grant.tenant, grant.session_id)], [_value(grant)])

    def _run(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        import redis

        try:
            return script(keys=keys, args=args)
        except redis.RedisError as err:
            raise BackendUnavailable(
                f"Redis lease operation failed ({type(err).__name__}: {err}); check that Redis is "
                "reachable (AGENTRT_REDIS_URL) or use the file lease on a single host"
            ) from err


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _value(grant: LeaseGrant) -> str:
    return f"{grant.token}|{grant.holder}"


def _parse_value(value: Any) -> tuple[int, str]:
    """Split a lease value `<token>|<holder>` (bytes or str)."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    token, _, holder = text.partition("|")
    try:
        return int(token), holder
    except ValueError:
        return -1, text


def _expiry(pttl: Any) -> float | None:
    """Unix time of expiry from a PTTL reply (None when the key has none or is gone)."""
    ms = int(pttl) if pttl is not None else -2
    return time.time() + ms / 1000 if ms >= 0 else None
