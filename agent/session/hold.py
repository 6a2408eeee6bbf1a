"""SessionHold: the session lease held for one run (fencing token checked at once, heartbeat running)."""

from __future__ import annotations

import logging
from types import TracebackType

from agent.core.config import AgentSettings
from agent.session.lease import LeaseGrant, LeaseHeartbeat, SessionLease, make_holder
from agent.session.record_store import session_streams

log = logging.getLogger("agentrt.turns")


class SessionHold:
    """Context manager: hold the session lease for one run (fenced, kept alive by a heartbeat)."""

    def __init__(self, settings: AgentSettings, lease: SessionLease, tenant_id: str, session_id: str) -> None:
        self.settings = settings
        self.lease = lease
        self.tenant_id = tenant_id
        self.session_id = session_id
        self.streams = session_streams(settings, tenant_id, session_id)
        """The session in the record store: its fence refuses the writes of any older holder."""
        self.grant: LeaseGrant | None = None
        self.heartbeat: LeaseHeartbeat | None = None

    @property
    def token(self) -> int | None:
        """The fencing token every write of this run carries."""
        return self.grant.token if self.grant is not None else None

    def __enter__(self) -> SessionHold:
        ttl = self.settings.persistence.lease_ttl_s
        self.grant = self.lease.acquire(
            self.tenant_id, self.session_id, make_holder(), ttl, token_floor=self.streams.highest_fence()
        )
        try:
            # From here on, any older holder's writes are refused.
            self.streams.advance_fence(self.grant.token)
        except Exception:
            self.lease.release(self.grant)
            raise
        self.heartbeat = LeaseHeartbeat(self.lease, self.grant).start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        grant: LeaseGrant | None = self.grant
        if self.heartbeat is not None:
            self.heartbeat.stop()
            grant = self.heartbeat.grant
        if grant is not None:
            try:
                self.lease.release(grant)
            except Exception as err:  # releasing is best effort: the TTL frees it anyway
                log.warning("could not release lease of %s: %s", self.session_id, err)
