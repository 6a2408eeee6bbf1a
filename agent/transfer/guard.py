"""Keep a running session out of an export or import: the session lease, without spending a token.

With the file lease (one host) the lease's `flock` is held for the whole read, so no run starts
meanwhile and no fencing token is granted (the export of an idle session stays byte-identical).
With the Redis or PostgreSQL lease (several hosts) a grant is taken and released (its token is
above the fence anyway, and nothing is written with it). A
session a run holds is refused (exit 4) with what to do.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from agent.core.errors import DataCorrupt, LeaseHeld, quote_id
from agent.session.lease_file import read_lease_state
from checkpointing.layout import lease_files, session_dir

if TYPE_CHECKING:
    from agent.core.config import AgentSettings


_AGAIN = {"exported": "export", "migrated": "migrate"}


def busy(session_id: str, holder: str, expires_at: float | None, what: str) -> LeaseHeld:
    """The refusal of a session that a run holds (exit 4), saying what to do."""
    err = LeaseHeld(session_id, holder, expires_at)
    err.args = (
        f"session {quote_id(session_id)} is in use (a run holds its lease: {holder}); nothing was {what}. "
        f"Wait for the run to finish or stop it, then {_AGAIN.get(what, 'import')} again",
    )
    return err


@contextmanager
def file_lease_lock(folder: Path, session_id: str, what: str) -> Iterator[None]:
    """Hold the session's file-lease lock (`lease.lock`) without taking a grant, so no run starts
    meanwhile and no token is spent; `busy` (exit 4) when a run holds it."""
    files = lease_files(folder)
    fd = os.open(files.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                info = read_lease_state(files.state)
            except DataCorrupt:
                info = {}
            raise busy(session_id, str(info.get("holder", "an unknown holder")), info.get("expires_at"), what) from None
        yield
    finally:
        os.close(fd)


@contextmanager
def session_guard(settings: AgentSettings, tenant: str, session_id: str, what: str) -> Iterator[None]:
    """Hold the session (as its configured lease kind allows) while it is read or checked."""
    kind = settings.persistence.lease
    if kind == "file":
        with file_lease_lock(session_dir(settings.base_dir, tenant, session_id), session_id, what):
            yield
        return
    if kind not in ("redis", "postgres"):
        yield  # an in-process lease: no other process can hold it
        return
    from agent.runner.services import build_lease

    lease = build_lease(settings)
    try:
        try:
            grant = lease.acquire(tenant, session_id, ttl_s=settings.persistence.lease_ttl_s)
        except LeaseHeld as err:
            raise busy(session_id, err.holder, err.expires_at, what) from None
        try:
            yield
        finally:
            lease.release(grant)
    finally:
        close = getattr(lease, "close", None)
        if close is not None:
            close()
