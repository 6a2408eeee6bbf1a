"""Session leases: one owner at a time per session, with a fencing token per grant.

Three implementations of `SessionLease`:

- `InProcessLease`: a process-local registry (threads of one process).
- `FileLease`: an `flock` on `<session dir>/lease.lock` (processes of one host). The lock lives as
  long as the holder process (or until `release`); the TTL written beside it is informational, so
  a paused holder keeps the session rather than losing it.
- `RedisLease`: `SET key value NX PX ttl` with compare-and-delete / compare-and-pexpire scripts
  (several hosts). The key expires after the TTL, so a holder paused too long loses the session;
  fencing tokens (`checkpointing.fencing`) then refuse its late writes.

A grant's token comes from a per-session counter and is higher than every earlier grant of that
session. `acquire` never waits: when someone else holds the session it raises `LeaseHeld` naming
the holder and expiry. `LeaseHeartbeat` extends a grant in the background during a long run.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from agent.errors import AgentrtError, BackendUnavailable, ConfigError, DataCorrupt, LeaseHeld
from checkpointing.exceptions import CorruptRecordError
from checkpointing.ids import validate_id
from checkpointing.layout import lease_files, session_dir
from checkpointing.records import atomic_write, decode_file, encode_record

if TYPE_CHECKING:  # redis loads when a Redis lease is made: a file lease (the default) never needs it
    import redis

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 30.0
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"


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


class FileLease:
    """An exclusive `flock` on `<session dir>/lease.lock`, plus `lease.json` naming the holder.

    `lease.json` and the token counter `lease.token` change only under a short `flock` on
    `lease.state.lock`, so a refused caller always reads the holder that beat it.

    Each file holds one framed record (`checkpointing.records`: `lease.token` `{token}`,
    `lease.json` `{holder, token, expires_at}`), replaced whole. A complete record whose checksum
    fails is an error naming the file (`DataCorrupt`) for a reader (the doctor), never read as
    "no lease" or as token 0; a new grant counts past a damaged `lease.token` from the fence
    (below) and rewrites it, so a damaged counter never stops the session.
    Files of the format before the framing (a plain integer, plain JSON) are still read as they
    are, with nothing to verify; every write is framed.

    Neither file is fsynced (what a machine crash can do to them costs nothing):
    - `lease.json` only names the holder for error messages and the doctor; the `flock` is the
      lock, and the kernel drops it with every process when the machine goes down. A lost, stale,
      empty or zeroed `lease.json` reads as "unknown holder" (the doctor reports a stale one).
    - `lease.token` may come back older (or empty, zeroed or damaged) after a crash, but a grant's token is always
      above `token_floor`, the fence's highest token (`FencingGuard.highest()`, durable:
      `fence.json` is fsynced before the holder's first write). Every token that ever wrote
      anything was recorded in the fence first, so a new token still exceeds all of them; a token
      granted but never fenced wrote nothing, and its holder died with the machine, so reusing
      its number refuses nobody wrongly. (`RedisLease` keeps its counter in Redis, and
      `InProcessLease` in memory: neither has a file to sync.)
    """

    def __init__(self, base_dir: Path | str) -> None:
        self.base_dir = Path(base_dir)
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], tuple[int, LeaseGrant]] = {}

    def acquire(
        self,
        tenant: str,
        session_id: str,
        holder: str | None = None,
        ttl_s: float = DEFAULT_TTL_S,
        token_floor: int | None = None,
    ) -> LeaseGrant:
        """Take the lock or raise `LeaseHeld` naming the holder recorded in `lease.json`."""
        _check_ids(tenant, session_id, ttl_s)
        directory = session_dir(self.base_dir, tenant, session_id)
        files = lease_files(directory)
        with self._state_lock(directory):
            fd = os.open(files.lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                try:
                    info = _lease_state(files.state)
                except CorruptRecordError as err:  # the lock says it is held; only the name is lost
                    info = {"holder": f"an unknown holder ({err.path} is damaged: {err.reason})"}
                raise LeaseHeld(session_id, info.get("holder", "unknown"), info.get("expires_at")) from None
            try:
                counter = files.token
                token = max(_granting_counter(counter), token_floor or 0) + 1
                atomic_write(counter, encode_record({"token": token}), durable=False)  # floored by the fence
                who = holder or make_holder()
                grant = LeaseGrant(token, who, time.time() + ttl_s, tenant, session_id, ttl_s)
                self._write_holder(directory, grant)
            except BaseException:
                os.close(fd)
                raise
        with self._lock:
            self._held[(tenant, session_id)] = (fd, grant)
        return grant

    def extend(self, grant: LeaseGrant, ttl_s: float | None = None) -> LeaseGrant:
        """Record a later expiry in `lease.json` (the lock itself does not lapse)."""
        ttl = grant.ttl_s if ttl_s is None else ttl_s
        directory = session_dir(self.base_dir, grant.tenant, grant.session_id)
        with self._lock:
            held = self._held.get((grant.tenant, grant.session_id))
            if held is None or held[1].token != grant.token:
                raise _lost(grant, None, None)
            new = replace(grant, expires_at=time.time() + ttl, ttl_s=ttl)
            with self._state_lock(directory):
                self._write_holder(directory, new)
            self._held[(grant.tenant, grant.session_id)] = (held[0], new)
            return new

    def release(self, grant: LeaseGrant) -> None:
        """Remove `lease.json` and unlock, if this object still holds `grant`."""
        directory = session_dir(self.base_dir, grant.tenant, grant.session_id)
        with self._lock:
            held = self._held.get((grant.tenant, grant.session_id))
            if held is None or held[1].token != grant.token:
                return
            del self._held[(grant.tenant, grant.session_id)]
            with self._state_lock(directory):
                try:
                    lease_files(directory).state.unlink()
                except FileNotFoundError:
                    pass
                finally:
                    os.close(held[0])

    @staticmethod
    @contextmanager
    def _state_lock(directory: Path) -> Iterator[None]:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(lease_files(directory).state_lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise BackendUnavailable(f"cannot open the lease files in {directory}: {err}; check base_dir") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _write_holder(directory: Path, grant: LeaseGrant) -> None:
        doc = {"holder": grant.holder, "token": grant.token, "expires_at": grant.expires_at}
        atomic_write(lease_files(directory).state, encode_record(doc), durable=False)  # holder info only

    def state(self, tenant: str, session_id: str) -> dict[str, Any]:
        """What `lease.json` of the session records (`holder`, `token`, `expires_at`; {} when none);
        read-only (see `read_lease_state`)."""
        return read_lease_state(lease_files(session_dir(self.base_dir, tenant, session_id)).state)

    def counter(self, tenant: str, session_id: str) -> int:
        """The session's token counter, the last token granted (0: none yet); read-only."""
        return read_token_counter(lease_files(session_dir(self.base_dir, tenant, session_id)).token)


_LEGACY_TOKEN = re.compile(rb"[0-9]+\n?")
_LEGACY_STATE_KEYS = {"holder", "token", "expires_at"}


def _crash_leftover(data: bytes) -> bool:
    """Empty, or only NUL bytes (and blanks): what a crash can leave of a file never fsynced."""
    return not data.replace(b"\x00", b"").strip()


def read_token_counter(path: Path) -> int:
    """The token counter in `path` (a `lease.token`): the last token granted, 0 when there is none.

    0 as well for a file a crash left empty or zeroed (the next grant is floored by the fence). A
    counter of the format before the framing (a plain integer) is read as it is. A damaged record
    raises `DataCorrupt` naming the file: its value is unknown.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    if _crash_leftover(data):
        return 0
    if _LEGACY_TOKEN.fullmatch(data):
        return int(data)
    try:
        rec = decode_file(path, data)
        token = rec.get("token")
        if not isinstance(token, int) or isinstance(token, bool) or token < 0:
            raise CorruptRecordError(str(path), 1, "the record holds no token counter")
    except CorruptRecordError as err:
        raise DataCorrupt(
            f"{path} is damaged ({err.reason}); nothing was changed. The next grant rewrites it: "
            "its token starts above the session's fence (fence.json)"
        ) from err
    return token


def _granting_counter(path: Path) -> int:
    """The counter a new grant counts from: `read_token_counter`, or 0 when `lease.token` is
    damaged. The grant is floored by the fence either way (see `FileLease`), so an unknown counter
    costs nothing, and the grant rewrites the file; logged, never silent."""
    try:
        return read_token_counter(path)
    except DataCorrupt as err:
        log.warning("%s; the new grant counts from the session's fence instead and rewrites it", err)
        return 0


def read_lease_state(path: Path) -> dict[str, Any]:
    """What a `lease.json` records: `holder`, `token`, `expires_at` ({} when missing, or left empty
    or zeroed by a crash: an unknown holder).

    A file of the format before the framing (plain JSON of those three keys) is read as it is. A
    damaged record raises `DataCorrupt` naming the file: the holder is unknown, not absent.
    """
    try:
        return _lease_state(path)
    except CorruptRecordError as err:
        raise DataCorrupt(
            f"{path} is damaged ({err.reason}); nothing was changed. It only names the lease holder: "
            "the holder's next heartbeat rewrites it, or delete it once no process runs the session"
        ) from err


def _lease_state(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    if _crash_leftover(data):
        return {}
    doc = _legacy_state(data)
    if doc is None:
        doc = decode_file(path, data)
        if set(doc) != _LEGACY_STATE_KEYS:
            raise CorruptRecordError(str(path), 1, "the record is not a lease holder record")
    out: dict[str, Any] = {}
    if isinstance(doc.get("holder"), str):
        out["holder"] = doc["holder"]
    if isinstance(doc.get("token"), int):
        out["token"] = doc["token"]
    if isinstance(doc.get("expires_at"), int | float):
        out["expires_at"] = float(doc["expires_at"])
    return out


def _legacy_state(data: bytes) -> dict[str, Any] | None:
    """A `lease.json` of the format before framing, or None (a framed file has a fourth key)."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and set(doc) == _LEGACY_STATE_KEYS else None


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
