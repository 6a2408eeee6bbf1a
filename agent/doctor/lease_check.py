"""The doctor's lease check: who holds the session's lease and until when, read without taking it.

"The same session recovered concurrently" (the troubleshooting table): lease.json plus the kernel's
lock table, or the Redis key, is read, never taken.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from agent.core.errors import AgentrtError, DataCorrupt
from agent.doctor.facts import Check, SessionFacts
from agent.doctor.finding import finding
from agent.session.lease import InProcessLease
from checkpointing.layout import lease_files

if TYPE_CHECKING:
    from agent.session.lease_redis import RedisLease

# --- lease -----------------------------------------------------------------------------------------------


def lease(f: SessionFacts) -> Check:
    """The lease holder and expiry, read without acquiring it."""
    info = lease_info(f)
    kind, now = info.pop("kind"), time.time()
    if kind == "memory":
        return finding(
            "lease",
            "WARN",
            "in-process lease: it cannot stop a second process or host from resuming",
            "set persistence.lease: file (one host), or redis or postgres (several hosts)",
            **info,
        )
    holder, expires = info.get("holder"), info.get("expires_at")
    if info.get("error"):
        what = f"lease state unreadable: {info['error']}"
        return finding("lease", "WARN", what, "check Redis / PostgreSQL / base_dir", **info)
    if holder is None:
        return finding("lease", "OK", f"free ({kind} lease)", "nothing to do", **info)
    info["expires_in_s"] = round(expires - now, 1) if isinstance(expires, float) else None
    locked = info.get("lock_held")
    if locked is False:
        return finding(
            "lease",
            "WARN",
            f"stale lease.json of {holder}: its process is gone and the lock is free",
            "nothing to do: the next run or resume takes the lease over",
            **info,
        )
    if isinstance(expires, float) and expires < now and locked:
        return finding(
            "lease",
            "FAIL",
            f"held by {holder}, whose lease expired {now - expires:.0f}s ago while its "
            "lock is still held: that process is alive but stuck",
            f"stop the holder ({holder})",
            **info,
        )
    return finding(
        "lease",
        "WARN",
        f"held by {holder} until {_iso(expires)}: a run of this session is in progress",
        "wait for it to finish or expire, then resume; never start a second worker on it",
        **info,
    )


def _iso(ts: Any) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if isinstance(ts, float) else "unknown"


def lease_info(f: SessionFacts) -> dict[str, Any]:
    """The lease's kind, holder, expiry (unix time) and, for the file lease, whether the lock is held."""
    held = f.ctx.lease
    if _is(held, "agent.session.lease_file", "FileLease"):
        return _file_lease(f.dir)
    if _is(held, "agent.session.lease_redis", "RedisLease"):
        held = cast("RedisLease", held)
        key = held.lease_key(f.tenant_id, f.session_id)
        try:
            value, pttl = held.client.get(key), held.client.pttl(key)
        except Exception as err:
            return {"kind": "redis", "key": key, "error": f"{type(err).__name__}: {err}"}
        if value is None:
            return {"kind": "redis", "key": key}
        token, _, holder = (value.decode() if isinstance(value, bytes) else str(value)).partition("|")
        expires = time.time() + int(pttl) / 1000 if isinstance(pttl, int) and pttl >= 0 else None
        return {"kind": "redis", "key": key, "holder": holder, "token": token, "expires_at": expires, "lock_held": True}
    if isinstance(held, InProcessLease):
        slot = held._slots.get((f.tenant_id, f.session_id))
        grant = slot.grant if slot is not None else None
        return {
            "kind": "memory",
            "holder": grant.holder if grant else None,
            "expires_at": grant.expires_at if grant else None,
        }
    from agent.session.lease_postgres import PostgresLease  # psycopg: only for a lease of none of the kinds above

    if isinstance(held, PostgresLease):
        where = {"kind": "postgres", "table": held.table_name, "database": f"{held.where}/{held.dbname}"}
        try:
            row = held.state(f.tenant_id, f.session_id)
        except AgentrtError as err:
            return {**where, "error": str(err)}
        if row.get("holder") is None:
            return {**where, "token": row.get("token")}
        return {**where, **row, "lock_held": True}
    return {"kind": type(held).__name__, "error": "unknown lease type: cannot be inspected"}


def _is(held: object, module: str, name: str) -> bool:
    """`isinstance(held, <module>.<name>)`, the module not imported for it: no instance of its
    classes exists before it is (the lease of each kind loads only its own module)."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(held, getattr(loaded, name))


def _file_lease(directory: Path) -> dict[str, Any]:
    from agent.session.lease_file import read_lease_state

    files = lease_files(directory)
    info: dict[str, Any] = {"kind": "file", "path": str(files.state)}
    try:
        doc = read_lease_state(files.state)
    except DataCorrupt as err:
        return {**info, "error": str(err)}
    except OSError as err:
        return {**info, "error": f"lease.json unreadable ({err})"}
    if "holder" in doc:
        info.update(holder=doc["holder"], token=doc.get("token"), expires_at=doc.get("expires_at"))
    pid = _flock_pid(files.lock)
    info["lock_held"] = None if pid == -1 else pid is not None
    if pid not in (None, -1):
        info["lock_pid"] = pid
    return info


def _flock_pid(path: Path) -> int | None:
    """The pid holding a flock on `path` per /proc/locks; None when unlocked, -1 when unknown."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return -1
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        parts = line.split()
        if "->" in parts:  # a waiter, not the holder
            continue
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == want:
            return int(parts[4]) if parts[4].isdigit() else -1
    return None
