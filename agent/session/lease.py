"""Session leases: one owner at a time per session, with a fencing token per grant.

Three implementations of `SessionLease`:

- `InProcessLease`: a process-local registry (threads of one process).
- `FileLease` (agent/session/lease_file.py): an `flock` on `<session dir>/lease.lock` (processes
  of one host). The lock lives as long as the holder process (or until `release`); the TTL
  written beside it is informational, so a paused holder keeps the session rather than losing it.
- `RedisLease` (agent/session/lease_redis.py): `SET key value NX PX ttl` with compare-and-delete /
  compare-and-pexpire scripts (several hosts). The key expires after the TTL, so a holder paused
  too long loses the session; fencing tokens (`checkpointing.fencing`) then refuse its late writes.

A grant's token comes from a per-session counter and is higher than every earlier grant of that
session. `acquire` never waits: when someone else holds the session it raises `LeaseHeld` naming
the holder and expiry. `LeaseHeartbeat` extends a grant in the background during a long run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

from agent.core.errors import AgentrtError, ConfigError, LeaseHeld
from checkpointing.ids import validate_id

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 30.0


def make_holder() -> str:
    """A holder string unique to this process and call: `host:pid:uuid`."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


@dataclass(frozen=True)
class LeaseGrant:
    """A granted lease. `token` is the fencing token every write of the holder must carry."""

    token: int
    holder: str
    expires_at: float  # unix time (seconds) the lease lapses unless extended
    tenant: str
    session_id: str
    ttl_s: float


class SessionLease(Protocol):
    """One owner at a time per (tenant, session)."""

    def acquire(
        self,
        tenant: str,
        session_id: str,
        holder: str | None = None,
        ttl_s: float = DEFAULT_TTL_S,
        token_floor: int | None = None,
    ) -> LeaseGrant:
        """Take the lease or raise `LeaseHeld` at once. `token_floor`: the new token is above it."""
        ...

    def extend(self, grant: LeaseGrant, ttl_s: float | None = None) -> LeaseGrant:
        """Push the expiry of a grant still held; raises `LeaseHeld` when it was lost."""
        ...

    def release(self, grant: LeaseGrant) -> None:
        """Give the lease up (a no-op when it was already lost)."""
        ...


def _check_ids(tenant: str, session_id: str, ttl_s: float) -> None:
    validate_id(tenant, "tenant id")
    validate_id(session_id, "session id")
    if not ttl_s > 0:
        raise ConfigError(f"lease ttl_s must be a positive number of seconds, got {ttl_s!r}")


@dataclass
class _Slot:
    counter: int = 0
    grant: LeaseGrant | None = None


class InProcessLease:
    """Leases shared by every `InProcessLease` of this process (or of one explicit registry)."""

    _shared: ClassVar[dict[tuple[str, str], _Slot]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, registry: dict[tuple[str, str], _Slot] | None = None) -> None:
        self._slots = InProcessLease._shared if registry is None else registry
        self._lock = InProcessLease._shared_lock if registry is None else threading.Lock()

    def acquire(
        self,
        tenant: str,
        session_id: str,
        holder: str | None = None,
        ttl_s: float = DEFAULT_TTL_S,
        token_floor: int | None = None,
    ) -> LeaseGrant:
        """Take the lease or raise `LeaseHeld`; an expired grant of another holder is taken over."""
        _check_ids(tenant, session_id, ttl_s)
        now = time.time()
        with self._lock:
            slot = self._slots.setdefault((tenant, session_id), _Slot())
            cur = slot.grant
            if cur is not None and cur.expires_at > now:
                raise LeaseHeld(session_id, cur.holder, cur.expires_at)
            slot.counter = max(slot.counter, token_floor or 0) + 1
            who = holder or make_holder()
            slot.grant = LeaseGrant(slot.counter, who, now + ttl_s, tenant, session_id, ttl_s)
            return slot.grant

    def extend(self, grant: LeaseGrant, ttl_s: float | None = None) -> LeaseGrant:
        """Push the expiry; raises `LeaseHeld` when another grant replaced this one."""
        ttl = grant.ttl_s if ttl_s is None else ttl_s
        with self._lock:
            slot = self._slots.get((grant.tenant, grant.session_id))
            cur = slot.grant if slot else None
            if slot is None or slot.counter != grant.token or (cur is not None and cur.token != grant.token):
                raise _lost(grant, cur.holder if cur else None, cur.expires_at if cur else None)
            slot.grant = replace(grant, expires_at=time.time() + ttl, ttl_s=ttl)
            return slot.grant

    def release(self, grant: LeaseGrant) -> None:
        """Drop the grant if it is still the current one."""
        with self._lock:
            slot = self._slots.get((grant.tenant, grant.session_id))
            if slot is not None and slot.grant is not None and slot.grant.token == grant.token:
                slot.grant = None


def _lost(grant: LeaseGrant, holder: str | None, expires_at: float | None) -> LeaseHeld:
    """The error for a grant that is no longer the current one."""
    return LeaseHeld(grant.session_id, holder or "nobody (the lease lapsed and was taken over)", expires_at)


class LeaseHeartbeat:
    """Extends a grant from a daemon thread every `interval_s` (a third of the TTL by default).

    When the lease is lost (`LeaseHeld` from `extend`) it stops, keeps the error in `lost` and calls
    `on_lost`. Transient storage errors are retried at the next beat and kept in `last_error`.
    Use as a context manager, or `start()` / `stop()`.
    """

    def __init__(
        self,
        lease: SessionLease,
        grant: LeaseGrant,
        interval_s: float | None = None,
        on_lost: Callable[[LeaseHeld], None] | None = None,
    ) -> None:
        self.lease = lease
        self.grant = grant
        self.interval_s = interval_s if interval_s is not None else max(grant.ttl_s / 3, 0.01)
        self.on_lost = on_lost
        self.lost: LeaseHeld | None = None
        self.last_error: AgentrtError | None = None
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-heartbeat-{grant.session_id}", daemon=True)

    def start(self) -> LeaseHeartbeat:
        """Start beating (once)."""
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating and wait for the thread (the lease itself is not released)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> LeaseHeartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.grant = self.lease.extend(self.grant)
                self.beats += 1
            except LeaseHeld as err:
                self.lost = err
                self._stop.set()
                if self.on_lost is not None:
                    self.on_lost(err)
                return
            except AgentrtError as err:
                self.last_error = err
