"""Replaying the debts dead processes left (`agentrt store converge`, the workers, `agentrt serve`).

A process that records a debt in a session's outbox (a write SQL or Redis missed in an outage)
replays it itself when the layer answers again (its retrier, agent/session/retrier.py). When that
process dies first (a killed worker, a CLI run that exited while the layer was down), the debt
would wait for the next process that reads or writes the session. `sweep` pays it without that:

- the debtors come from the outbox's own index, never from a walk of the sessions: on the files
  store one folder read for the tenants and one per tenant for its `outbox-due` markers; on the
  PostgreSQL record store one query for the sessions holding an `@outbox` stream;
- each is replayed (`converge`, the same replay as a read of the session) under the session's
  lease, so a session a live run holds is skipped (its own process pays) and never written twice;
- what stays owed (the layer still down, or not configured in this process) is reported and
  replayed by a later sweep.

`maybe_sweep` is the periodic form, run by the Celery workers and `agentrt serve` at most every
`session.converge_every_s`, by one process of the fleet at a time (`agent.session.periodic`): a
`flock` on `base_dir/converge.lock`, or on the PostgreSQL record store a document of the store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.core.errors import AgentrtError, LeaseHeld
from agent.session.periodic import run_claimed

if TYPE_CHECKING:
    from agent.session.outbox import Lag
    from agent.session.runner_parts import RunnerParts

log = logging.getLogger("agentrt.sessions")
SWEEP_LOCK_FILE = "converge.lock"
"""At the root of base_dir: the claim of the periodic sweep; its modification time is the last run."""
STORE_CLAIM = ("@store", "@converge", "sweep")
"""(tenant, thread, document) of the fleet's sweep claim on the PostgreSQL store: outside the id
alphabet, so never a session's."""


@dataclass(frozen=True)
class Debtor:
    """One session the sweep looked at, and what it found."""

    tenant_id: str
    session_id: str
    replayed: dict[str, int] = field(default_factory=dict)
    """Layer -> how many missed writes were replayed."""
    owed: dict[str, int] = field(default_factory=dict)
    """Layer -> missed writes still owed (the layer did not answer, or is not configured here)."""
    skipped: str | None = None
    """Why the session was not replayed (a run holds it, its outbox is damaged)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form (`agentrt store converge --json`)."""
        return {
            "tenant_id": self.tenant_id,
            "session_id": self.session_id,
            "replayed": self.replayed,
            "owed": self.owed,
            "skipped": self.skipped,
        }


@dataclass
class Sweep:
    """What one sweep did."""

    sessions: list[Debtor] = field(default_factory=list)
    more: int = 0
    """Debtors past `limit`, left for the next sweep."""

    @property
    def replayed(self) -> list[Debtor]:
        """The sessions with at least one layer replayed."""
        return [d for d in self.sessions if d.replayed]

    @property
    def owed(self) -> list[Debtor]:
        """The sessions that still owe a layer after the sweep (skipped ones included)."""
        return [d for d in self.sessions if d.owed or d.skipped]

    def summary(self) -> str:
        """One line: how many sessions were replayed, still owe, were skipped."""
        skipped = sum(1 for d in self.sessions if d.skipped)
        owing = sum(1 for d in self.sessions if d.owed and not d.skipped)
        if not self.sessions:
            return "no session owes the SQL or Redis layer a write"
        parts = [f"{len(self.replayed)} session(s) replayed"]
        if owing:
            parts.append(f"{owing} still owe a layer that did not answer")
        if skipped:
            parts.append(f"{skipped} skipped")
        if self.more:
            parts.append(f"{self.more} more left for the next run")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (`agentrt store converge --json`)."""
        return {"sessions": [d.to_json() for d in self.sessions], "more": self.more, "summary": self.summary()}


def _changes(lags: dict[str, Lag]) -> dict[str, int]:
    return {layer: lag.changes for layer, lag in lags.items()}


def sweep(runner: RunnerParts, tenants: Sequence[str] | None = None, limit: int | None = None) -> Sweep:
    """Replay what the layers missed for every session that owes one, in `tenants` (None: all),
    at most `limit` sessions; a session a run holds is skipped (see the module doc)."""
    from agent.session.hold import SessionHold

    manager = runner.manager
    debtors = manager.outbox.debtors(tenants)
    out = Sweep()
    if limit is not None and len(debtors) > limit:
        out.more = len(debtors) - limit
        debtors = debtors[:limit]
    for tenant, sid in debtors:
        hold = SessionHold(runner.settings, runner.lease, tenant, sid)
        try:
            hold.__enter__()
        except LeaseHeld as err:
            out.sessions.append(Debtor(tenant, sid, skipped=f"a run holds it ({err.holder}); that run replays it"))
            continue
        except AgentrtError as err:  # the lease's server, a damaged fence
            out.sessions.append(Debtor(tenant, sid, skipped=f"its lease was not taken: {err}"))
            continue
        try:
            out.sessions.append(_replay(runner, tenant, sid))
        finally:
            hold.__exit__(None, None, None)
    for d in out.sessions:
        if d.replayed:
            log.info("session %s/%s: replayed what %s missed", d.tenant_id, d.session_id, ", ".join(d.replayed))
    return out


def _replay(runner: RunnerParts, tenant: str, sid: str) -> Debtor:
    manager = runner.manager
    try:
        before = _changes(manager.behind(tenant, sid))
        if before:
            manager.converge([(tenant, sid)])
        after = _changes(manager.behind(tenant, sid))
    except (AgentrtError, OSError) as err:  # a damaged outbox: `doctor ID --repair` is the fix
        return Debtor(tenant, sid, skipped=str(err))
    replayed = {layer: n for layer, n in before.items() if layer not in after}
    return Debtor(tenant, sid, replayed=replayed, owed=after)


def maybe_sweep(runner: RunnerParts) -> Sweep | None:
    """Run `sweep` if `session.converge_every_s` is set, it is due, and no other process of the
    fleet runs it; else None."""
    every = runner.settings.session.converge_every_s
    if every is None:
        return None
    return run_claimed(runner.settings, SWEEP_LOCK_FILE, STORE_CLAIM, every, lambda: _logged(sweep(runner)))


def _logged(out: Sweep) -> Sweep:
    if out.sessions:
        log.info("converging the session layers: %s", out.summary())
    return out


class Sweeper:
    """A daemon thread that calls `maybe_sweep` every `session.converge_every_s` while its process
    runs (a Celery worker's pool process, `agentrt serve`); never fails or keeps the process alive."""

    def __init__(
        self,
        runner: Callable[[], RunnerParts],
        every_s: float,
        stopping: Callable[[], bool] = lambda: False,
        name: str = "agentrt-converge",
    ) -> None:
        self.runner = runner
        self.every_s = max(0.05, every_s)
        self.stopping = stopping
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> Sweeper:
        """Start the thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the current sweep (a closing process)."""
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            if self.stopping():
                return
            try:
                maybe_sweep(self.runner())
            except Exception as err:  # the next period tries again
                log.warning("replaying what the session layers missed (converge) failed: %s", err)
