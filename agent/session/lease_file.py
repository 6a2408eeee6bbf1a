"""`FileLease`: a session's lease as an flock beside its files, and the lease state those files hold."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.core.errors import BackendUnavailable, DataCorrupt, LeaseHeld
from agent.session.lease import DEFAULT_TTL_S, LeaseGrant, _check_ids, _lost, make_holder
from checkpointing.exceptions import CorruptRecordError
from checkpointing.fsyncs import atomic_write
from checkpointing.layout import lease_files, session_dir
from checkpointing.records import decode_file, encode_record

log = logging.getLogger(__name__)


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
