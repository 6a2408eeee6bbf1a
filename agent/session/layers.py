"""Layer health and convergence of the session manager: outages, refills, the durable outbox.

`LayerKeeper` is the part of `ChatSessionManager` that runs storage calls on a layer while
tracking its outages (`_use`: one warning per outage, skipped until `retry_interval_s` passed),
keeps what a down layer missed (in memory for this process, and durably in the session's outbox,
see outbox.py), and replays it, in order and from the source of truth, when the layer answers
again: before this process's next use of the layer, at the background retrier's interval
(retrier.py), in `converge` (a run's end, `agentrt doctor ID --repair`), or when any process next
reads the session. A replayed session row never moves back (`put_if_newer`): a replay racing a
save of a newer copy leaves the newer one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from agent.core.errors import BackendUnavailable, DataCorrupt
from agent.session.chat_memory import ChatMemory
from agent.session.outbox import Debt, Lag, Owed, SessionOutbox
from agent.session.retrier import Retrier
from agent.session.session import ChatSession, SessionDocumentCorrupt, SessionStore
from agent.session.stores.jsonl import JsonlSessionStore

if TYPE_CHECKING:
    from agent.session.stores.sql import SqlSessionStore

log = logging.getLogger("agentrt.sessions")
T = TypeVar("T")
Key = tuple[str, str]


class Down(Exception):
    """Internal: the layer is down (or still skipped after an outage)."""


@dataclass
class Health:
    """What the manager knows of one layer: down or up, when to retry, what it missed."""

    down: bool = False
    retry_at: float = 0.0
    pending: dict[Key, ChatSession] = field(default_factory=dict)
    """What the layer missed while down: the newest copy of each session to write back."""


class LayerKeeper:
    """Outage tracking and convergence over the layers of a session manager (see the module doc)."""

    mode: str
    l2: SessionStore | None
    sql: SqlSessionStore | None
    jsonl: JsonlSessionStore
    memory: ChatMemory
    outbox: SessionOutbox
    read_order: list[SessionStore]
    retry_interval_s: float
    _clock: Callable[[], float]
    _health: dict[str, Health]
    _lock: threading.RLock
    _owed: set[tuple[Key, str, Owed, int | None]]
    _debtors: set[Key]
    _retrier: Retrier

    def _use(self, layer: SessionStore, op: Callable[[], T]) -> T:
        """Run `op` on `layer`, tracking outages; raises `Down` when the layer is or goes down."""
        health = self._health[layer.name]
        if health.down:
            with self._lock:
                if health.down:
                    if self._clock() < health.retry_at:
                        raise Down(layer.name)
                    try:
                        # What the layer missed goes back first, so nothing stale is ever read from it.
                        self._refill(layer, health)
                        result = op()
                    except BackendUnavailable as err:
                        health.retry_at = self._clock() + self.retry_interval_s
                        raise Down(layer.name) from err
                    health.down = False
                    log.warning("session layer %s is reachable again; refilled what it missed", layer.name)
                    return result
        try:
            return op()
        except SessionDocumentCorrupt:
            raise  # one damaged record, not an outage
        except BackendUnavailable as err:
            self._mark_down(layer, err)
            raise Down(layer.name) from err

    def _mark_down(self, layer: SessionStore, err: Exception) -> None:
        with self._lock:
            health = self._health[layer.name]
            if not health.down:
                log.warning(
                    "session layer %s is down, continuing with the other layers of mode %s: %s",
                    layer.name,
                    self.mode,
                    err,
                )
            health.down = True
            health.retry_at = self._clock() + self.retry_interval_s

    def _owe(self, layer: SessionStore, session: ChatSession) -> None:
        with self._lock:
            health = self._health[layer.name]
            if health.down:  # back up meanwhile (a refill holds the lock): the outbox has the rest
                health.pending[session.key()] = session
        self._owe_durably(session.key(), layer.name, Owed.SESSION, session.version)

    def _owe_durably(self, key: Key, layer: str, what: Owed, version: int | None = None) -> None:
        """Record in the outbox that `layer` missed a write (one record per missed write: a save's
        `version` is recorded once however many of its steps missed the layer)."""
        if layer not in ("SQL", "L2"):
            return  # L1 lives in this process only
        once = (key, layer, what, version)
        if version is not None and once in self._owed:
            return
        try:
            self.outbox.owe(key[0], key[1], layer, what)
        except OSError as err:
            log.warning("outbox of session %s not written (%s): %s may lag until the next save", key[1], err, layer)
            return
        except DataCorrupt as err:
            # Reads of the session stop on this error until `doctor --repair`, which owes every layer a full replay.
            log.warning("outbox of session %s not written: %s", key[1], err)
            return
        with self._lock:
            if version is not None:
                self._owed.add(once)
            self._debtors.add(key)
        self._retrier.start()

    def _refill(self, layer: SessionStore, health: Health) -> None:
        for key, session in list(health.pending.items()):
            if layer is self.sql:
                self.sql.put_if_newer(session)  # another process may have written a newer copy
                self.memory.sync_sql(session)
            else:
                layer.put(session)
            health.pending.pop(key, None)
            # The put above wrote this process's newest copy: that pays a cache's debt as it is.
            try:
                self._pay_layer(layer, key, replay=layer is self.sql)
            except DataCorrupt as err:  # the copy is written; reads of the session report the damage
                log.warning("outbox of session %s not settled: %s", key[1], err)

    def _layer(self, name: str) -> SessionStore | None:
        return next((x for x in self.read_order if x.name == name), None)

    def _replay(self, layer: SessionStore, debt: Debt, key: Key) -> None:
        """Write what `debt` says the layer missed, from the source of truth."""
        if layer is self.sql and debt.what is Owed.MESSAGES:
            self.memory.sync_all_sql(*key)
        elif layer is self.sql:
            newest = self.jsonl.get(*key)  # PRIMARY's truth; in MIRROR the mirror took what SQL missed
            if newest is not None:
                self.sql.put_if_newer(newest)
        else:
            layer.delete(*key)  # a cache: the next read refills it from a durable layer

    def _pay_layer(self, layer: SessionStore, key: Key, replay: bool = True) -> int:
        """Replay and settle every debt the outbox holds for `layer`; how many (raises `BackendUnavailable`).

        `replay=False` only marks them paid (the caller has just written the newest copy itself)."""
        with self._lock:
            self._owed = {o for o in self._owed if o[:2] != (key, layer.name)}
        mine = [d for d in self.outbox.debts(*key) if d.layer == layer.name]
        if not mine:
            return 0
        for debt in mine if replay else ():
            self._replay(layer, debt, key)
        try:
            self.outbox.settle(*key, layer.name, max(d.offset for d in mine))
        except OSError as err:
            log.warning("outbox of session %s not settled (%s); it is replayed again later", key[1], err)
        log.info("session %s: replayed what layer %s missed (%d debts)", key[1], layer.name, len(mine))
        return len(mine)

    def _pay(self, key: Key, only: str | None = None) -> set[str]:
        """Replay the session's outbox debts (of layer `only`, or all); returns the layers still owed.

        A layer known down is tried only once its retry interval has passed (`_use`); when it
        answers, it is marked up again. A damaged outbox raises `DataCorrupt`: what a layer owes is
        unknown, so nothing is read from the layers until `agentrt doctor ID --repair` has replaced it.
        """
        if not self.outbox.owes(*key):
            self._debtors.discard(key)
            return set()
        try:
            debts = self.outbox.debts(*key)
        except OSError as err:
            log.warning("outbox of session %s unreadable (%s); its layers are read as they are", key[1], err)
            return set()
        unpaid: set[str] = set()
        for name in dict.fromkeys(d.layer for d in debts if only in (None, d.layer)):
            layer = self._layer(name)
            if layer is None or name not in self._health:
                continue  # not configured in this process: the debt waits for one that has it
            try:
                self._use(layer, partial(self._pay_layer, layer, key))
            except Down:
                unpaid.add(name)
        if not unpaid:
            with self._lock:
                self._debtors.discard(key)
        return unpaid

    def converge(self, keys: Iterable[Key] | None = None) -> dict[Key, set[str]]:
        """Try now, whatever the retry interval, to replay what the layers missed: for `keys`, or
        every session this process recorded debts for. Returns the sessions still owed, with their
        layers (a run's end calls it once; the background retrier at each interval)."""
        with self._lock:
            for health in self._health.values():
                health.retry_at = 0.0  # due now: one attempt each
            todo = list(dict.fromkeys(keys if keys is not None else self._debtors))
        left: dict[Key, set[str]] = {}
        for key in todo:
            try:
                unpaid = self._pay(key)
            except (DataCorrupt, SessionDocumentCorrupt) as err:
                log.warning("session %s: what the layers missed is not replayed: %s", key[1], err)
                continue
            if unpaid:
                left[key] = unpaid
        return left

    def behind(self, tenant_id: str, session_id: str) -> dict[str, Lag]:
        """How far behind each layer is for the session (the outbox's unpaid writes; read-only)."""
        return self.outbox.behind(tenant_id, session_id)

    def layer_status(self) -> dict[str, str]:
        """Each layer with "up" or "down" (as last seen) and how many writes it still owes."""
        return {
            name: ("down" if h.down else "up") + (f" ({len(h.pending)} pending)" if h.pending else "")
            for name, h in self._health.items()
        }

    def _invalidate_cache(self, key: Key, version: int) -> None:
        # Before the durable write: a process killed between it and the cache write must not leave
        # the older copy in Redis for the next reader. Redis down: the outbox remembers it instead.
        if self.l2 is None:
            return
        try:
            self._use(self.l2, partial(self.l2.delete, *key))
        except Down:
            self._owe_durably(key, self.l2.name, Owed.SESSION, version)

    def _check_page_rows(self, session: ChatSession) -> None:
        # A process killed between an event append and its SQL row leaves no debt: count instead.
        if self.sql is None or self._health["SQL"].down:
            return
        try:
            if self.memory.sql_behind(session.tenant_id, session.session_id):
                added = self.memory.sync_all_sql(session.tenant_id, session.session_id)
                log.info("session %s: %d page rows were missing in SQL and were written", session.session_id, added)
        except BackendUnavailable as err:
            self._mark_down(self.sql, err)
            self._owe_durably(session.key(), "SQL", Owed.MESSAGES)
