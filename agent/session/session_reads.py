"""The reads of `ChatSessionManager` across its layers: find a session, list, page and search, and
the session's event log.

`SessionReads._find` reads the layers of the mode in order (module docstring of
agent/session/manager.py: what each mode reads, when a damaged copy stops the read), fills the
layers that missed, and falls back to rebuilding the session from its event log; `list`, `page`
and `search` answer from the mode's source of truth or its index of sessions.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from agent.core.errors import BackendUnavailable, ConfigError, quote_id
from agent.session.layers import Down as _Down
from agent.session.layers import Health as _Health
from agent.session.layers import LayerKeeper
from agent.session.session import ChatSession, SessionDocumentCorrupt, SessionStore
from agent.session.stores.listing import SessionPage, page_sessions, search_rows, sql_page
from checkpointing.exceptions import CorruptRecordError, InvalidIdError
from checkpointing.ids import validate_id
from checkpointing.session_index import EVERY_ROW, RowFilter, SessionRow

if TYPE_CHECKING:
    from agent.session.stores.sql import SqlSessionStore
    from checkpointing.entry_log import EventLog

_T = TypeVar("_T")
log = logging.getLogger("agentrt.sessions")


class SessionReads(LayerKeeper):
    """Reads across the layers of a session manager (see the module docstring)."""

    durable_layers: list[SessionStore]
    _health: dict[str, _Health]
    _local: threading.local

    @property
    def last_read_trace(self) -> list[tuple[str, str]]:
        """(layer, answer) for each layer the calling thread's last read touched, in order."""
        trace: list[tuple[str, str]] = getattr(self._local, "trace", [])
        return trace

    @last_read_trace.setter
    def last_read_trace(self, trace: list[tuple[str, str]]) -> None:
        self._local.trace = trace

    def locate(self, tenant_id: str, session_id: str) -> dict[str, str]:
        """Which layers hold the session: layer -> "present" / "absent" / "down" / "corrupt" (doctor)."""
        self._check_ids(tenant_id, session_id)
        out: dict[str, str] = {}
        for layer in self.read_order:
            try:
                got = self._use(layer, partial(layer.get, tenant_id, session_id))
                out[layer.name] = "present" if got is not None else "absent"
            except _Down:
                out[layer.name] = "down"
            except SessionDocumentCorrupt:
                out[layer.name] = "corrupt"
        return out

    def _check_ids(self, tenant_id: str, session_id: str = "x") -> None:
        try:
            validate_id(tenant_id, "tenant id")
            validate_id(session_id, "session id")
        except InvalidIdError as err:
            raise ConfigError(str(err)) from err

    def _find(self, tenant_id: str, session_id: str, user_id: str | None) -> ChatSession | None:
        trace: list[tuple[str, str]] = []
        missed: list[SessionStore] = []
        found: ChatSession | None = None
        sql_down = False
        owed = self._pay((tenant_id, session_id))
        for layer in self.read_order:
            if self.mode == "MIRROR" and layer is self.jsonl and not sql_down:
                break  # MIRROR reads its JSONL mirror only while SQL (the source of truth) is down
            if layer.name == "L2" and "L2" in owed:
                # Its copy may be stale: never read it. "down" when the replay just failed on it.
                trace.append((layer.name, "down" if self._health[layer.name].down else "owed"))
                continue
            try:
                got = self._use(layer, partial(layer.get, tenant_id, session_id))
            except _Down:
                trace.append((layer.name, "down"))
                sql_down = sql_down or layer is self.sql
                continue
            except SessionDocumentCorrupt as err:
                if layer is self.jsonl:
                    # JSONL answers as the source of truth here (PRIMARY, JSONL_ONLY, or MIRROR with
                    # SQL down): another layer's copy may be older, so nothing else is returned.
                    self.last_read_trace = [*trace, (layer.name, "corrupt")]
                    raise self._document_corrupt(session_id, err) from err
                log.warning("session %s: %s layer copy skipped: %s", session_id, layer.name, err)
                trace.append((layer.name, "corrupt"))
                sql_down = sql_down or layer is self.sql
                continue
            if got is None or not visible(got, tenant_id, user_id):
                trace.append((layer.name, "miss"))
                missed.append(layer)
                continue
            trace.append((layer.name, "hit"))
            found = got
            if self.mode == "MIRROR" and layer is self.sql:
                found = self._newer_mirror(found, trace, missed)
            break
        if found is None and (self.mode != "MIRROR" or sql_down):
            found = self._rebuild(tenant_id, session_id, user_id, trace)
            if any(answer == "down" for _, answer in trace):
                missed = []  # a down layer may hold better data than a rebuild: cache nothing
        self.last_read_trace = trace
        if found is not None:
            for layer in missed:
                self._fill(layer, found, read_fill=True)
        return found

    def _rebuild(
        self, tenant_id: str, session_id: str, user_id: str | None, trace: list[tuple[str, str]]
    ) -> ChatSession | None:
        # Last resort: the event log alone (a lost session.json, a crash before the first save).
        try:
            got = self._use(self.jsonl, partial(self.jsonl.rebuild, tenant_id, session_id))
        except (_Down, SessionDocumentCorrupt):
            return None
        if got is None or not visible(got, tenant_id, user_id):
            return None
        trace.append(("JSONL", "rebuilt"))
        return got

    def _newer_mirror(
        self, found: ChatSession, trace: list[tuple[str, str]], missed: list[SessionStore]
    ) -> ChatSession:
        # A process that died while SQL was down took its pending refill with it; its last save
        # reached only the JSONL mirror, which then holds a newer version than SQL.
        try:
            mirror = self.jsonl.get(found.tenant_id, found.session_id)
        except SessionDocumentCorrupt as err:
            # SQL is the source of truth: its copy stands, but the damaged mirror is named.
            sid = quote_id(found.session_id)
            log.warning(
                "session %s: JSONL mirror: %s; the SQL copy is used. Run `agentrt doctor %s`",
                sid,
                _damage(err),
                sid,
            )
            trace.append(("JSONL", "corrupt"))
            return found
        except BackendUnavailable:
            return found
        if mirror is None or mirror.version <= found.version:
            return found
        trace.append(("JSONL", "newer"))
        if self.sql is not None:
            missed.append(self.sql)
        return mirror

    def _document_corrupt(self, session_id: str, err: SessionDocumentCorrupt) -> SessionDocumentCorrupt:
        sid = quote_id(session_id)
        why = "SQL is down" if self.mode == "MIRROR" else "JSONL is the source of truth"
        return SessionDocumentCorrupt(
            f"session {sid}: {_damage(err)}; nothing was read from another layer or changed (mode {self.mode}: "
            f"{why}); repair it with `agentrt doctor {sid} --repair`"
        )

    def _fill(self, layer: SessionStore, session: ChatSession, read_fill: bool = False) -> None:
        # A read's fill must not overwrite what a concurrent save wrote after this read began.
        put = getattr(layer, "put_if_absent", None) if read_fill else None
        try:
            self._use(layer, partial(put or layer.put, session))
        except _Down:
            self._owe(layer, session)

    def list(self, tenant_id: str, user_id: str | None = None) -> builtins.list[ChatSession]:
        """The tenant's sessions (only `user_id`'s when given) from the mode's source of truth."""
        self._check_ids(tenant_id)
        for layer in self.durable_layers:
            try:
                sessions = self._use(layer, partial(layer.list, tenant_id, user_id))
            except _Down:
                continue
            for s in sessions:
                s.refresh_status()
            return sorted(
                (s for s in sessions if visible(s, tenant_id, user_id)),
                key=lambda s: (s.created_at, s.session_id),
            )
        raise BackendUnavailable(
            f"no durable session layer is reachable ({', '.join(x.name for x in self.durable_layers)}); "
            "check base_dir and the database"
        )

    def page(
        self, tenant_id: str, where: RowFilter = EVERY_ROW, *, after: str | None = None, limit: int | None = 20
    ) -> SessionPage:
        """One page of the tenant's sessions matching `where`, newest activity first, by an index
        (never a walk).

        With a SQL session table that holds every session (MIRROR; PRIMARY on a server database)
        that table is the index; otherwise (the embedded default, JSONL_ONLY) the files store's
        index of sessions. SQL down: the files index answers.
        """
        return self._by_index(
            tenant_id,
            lambda sql: sql_page(sql, self.jsonl, tenant_id, where, after=after, limit=limit),
            lambda: page_sessions(self.jsonl, tenant_id, where, after=after, limit=limit),
        )

    def search(
        self, tenant_id: str, where: RowFilter = EVERY_ROW, *, count_only: bool = False, **paging: Any
    ) -> builtins.list[SessionRow] | int:
        """Index rows of the tenant's sessions matching `where` (or their number); `paging`: the
        order, descending, limit and offset of `SessionIndex.page`. What the API's thread search
        reads, without any session document."""
        from agent.session.stores import sql_listing

        return self._by_index(
            tenant_id,
            lambda sql: sql_listing.search(sql, tenant_id, where, count_only=count_only, **paging),
            lambda: search_rows(self.jsonl, tenant_id, where, count_only=count_only, **paging),
        )

    def _by_index(self, tenant_id: str, on_sql: Callable[[SqlSessionStore], _T], on_files: Callable[[], _T]) -> _T:
        """`on_sql` on the SQL session table when it is the index and answers, else `on_files`."""
        self._check_ids(tenant_id)
        sql = self.sql_index()
        if sql is not None:
            try:
                return self._use(sql, partial(on_sql, sql))
            except _Down as err:
                if self.jsonl is not None and self.jsonl.store is not None:
                    # On the PostgreSQL store the session table is the only index: no local one stands in.
                    raise BackendUnavailable(
                        f"cannot list sessions: the session table does not answer ({err})"
                    ) from err
        return on_files()

    def event_log(self, tenant_id: str, session_id: str) -> EventLog:
        """The session's event log (its runs, messages and branches), to read and to record in:
        the one handle the manager keeps open for the session, so a read sees what a turn of this
        process appended."""
        return self.jsonl.event_log(tenant_id, session_id)

    def sql_index(self) -> SqlSessionStore | None:
        """The SQL session table when it holds every session (MIRROR; PRIMARY on a server database)."""
        sql = self.sql
        if sql is not None and (self.mode == "MIRROR" or not sql.url.startswith("sqlite")):
            return sql
        return None


def _damage(err: SessionDocumentCorrupt) -> str:
    """Which file of a damaged JSONL copy is bad, in one line ("<file>: ..." / "<file>:<line> ...")."""
    cause = err.__cause__
    if isinstance(cause, CorruptRecordError):
        return f"{cause.path}:{cause.line} is damaged ({cause.reason})"
    return " ".join(str(cause or err).split())


def visible(session: ChatSession, tenant_id: str, user_id: str | None) -> bool:
    """Whether `session` is the tenant's (and the user's, when given)."""
    return session.tenant_id == tenant_id and (user_id is None or session.user_id == user_id)
