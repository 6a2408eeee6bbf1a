"""Listing sessions by an index, not a walk: the rows agentrt keeps in `checkpointing.session_index`.

The files store keeps one row a session in `base_dir/sessions.index.sqlite`, written by
`JsonlSessionStore.put` (and `create_log`, so a session whose first save is still to come lists
too) right after `session.json`. A page is one indexed query; the `session.json` of each row of
the page is then read (O(page)) to return the session itself and to correct a row a crash left
behind its document (the row's version is older: it is rewritten and the page asked again).

What a row holds besides its key and the columns: `meta` = agent id, first message, branch
count, turns, the newest run's status, the current branch and the thread metadata (the user's,
searchable with `--meta KEY=VALUE` and by the API's `metadata` filter).

When the index file is missing, damaged or incomplete (made by a write after the file was lost),
a listing rebuilds it first by one walk of the session folders (the cost the listing had before
the index, paid once) and logs a warning; `agentrt doctor` reports such an index and
`agentrt doctor --repair` rebuilds it. A session whose `session.json` exists but whose row was
never written (a crash between the two writes of its first save) lists after that repair.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agent.core.errors import BackendUnavailable, InputError
from agent.core.statuses import SessionStatus
from agent.session.branch_book import live_branches
from agent.session.session import THREAD_METADATA, ChatSession
from checkpointing.entry_log import EventLog
from checkpointing.exceptions import CheckpointingError
from checkpointing.layout import is_id, sessions_root, tenant_ids, tenants_root
from checkpointing.session_index import (
    EVERY_ROW,
    BadCursor,
    IndexUnusable,
    MetaPath,
    RowFilter,
    SessionIndex,
    SessionRow,
    decode_cursor,
    instant,
)

if TYPE_CHECKING:
    from agent.session.stores.jsonl import JsonlSessionStore
    from agent.session.stores.sql import SqlSessionStore

_rebuilding = threading.Lock()
log = logging.getLogger("agentrt.sessions")
EXPIRY = (SessionStatus.ACTIVE.value, SessionStatus.EXPIRED.value)
"""An ACTIVE row whose expiry time has passed lists as EXPIRED."""
_ROUNDS = 3
"""Times a page is asked again after stale rows were corrected (each round corrects every stale row)."""


@dataclass(frozen=True)
class Listed:
    """One session of a page, with its index row (meta: first message, branch count, turns, ...)."""

    session: ChatSession
    row: SessionRow

    @property
    def cursor(self) -> str:
        """The cursor that continues the listing after this session."""
        return SessionIndex.cursor(self.row)


@dataclass(frozen=True)
class SessionPage:
    """A page of sessions, newest activity first, and the cursor of the next page (None: last page)."""

    items: list[Listed]
    next_cursor: str | None


def first_message(session: ChatSession, events: EventLog | None) -> str:
    """The session's first user message (page history, else the log's first user turn)."""
    found = next((m.content for m in session.messages if m.role == "user"), None)
    if found is None and events is not None and events.exists():
        found = next((str(e.payload.get("content", "")) for e in events.entries(frozenset({"user_turn"}))), None)
    return found or ""


def index_meta(session: ChatSession, events: EventLog | None) -> dict[str, Any]:
    """The searchable values of one session's row."""
    branches = 1
    if events is not None and events.exists():
        branches = max(1, len(live_branches(events)))
    metadata = session.context.get(THREAD_METADATA)
    return {
        "agent_id": session.agent_id,
        "first_message": first_message(session, events)[:500],
        "branch_count": branches,
        "turns": session.loop_count,
        "last_run_status": session.last_run_status,
        "branch_id": session.current_branch_id,
        "metadata": metadata if isinstance(metadata, dict) else {},
        # Where a fresh fork's state is read (None: the branch head), so a thread search reads the
        # values of the page's threads without their session documents.
        "fork_checkpoint_id": session.context.get("fork_checkpoint_id"),
    }


def index_row(session: ChatSession, events: EventLog | None) -> SessionRow:
    """The index row of `session` (its events log gives the branch count and a first message)."""
    return SessionRow(
        tenant_id=session.tenant_id,
        session_id=session.session_id,
        user_id=session.user_id,
        status=session.status.value,
        created_at=session.created_at,
        last_activity=session.last_active_time,
        expires_at=session.expires_at(),
        version=session.version,
        meta=index_meta(session, events),
    )


def meta_filters(pairs: Sequence[str]) -> list[tuple[MetaPath, Any]]:
    """`KEY=VALUE` strings (the CLI's `--meta`) as filters on the thread metadata; `InputError` if bad."""
    out: list[tuple[MetaPath, Any]] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or '"' in key or "\\" in key:
            raise InputError(f"--meta takes KEY=VALUE (a key without quotes or backslashes), got {pair[:80]!r}")
        out.append((("metadata", key), value))
    return out


def walk_rows(store: JsonlSessionStore) -> Iterator[SessionRow]:
    """The row of every session under base_dir (one walk: session.json, else rebuilt from its log)."""
    for tenant in tenant_ids(store.base_dir):
        root = sessions_root(store.base_dir, tenant)
        try:
            names = sorted(p.name for p in root.iterdir() if p.is_dir() and is_id(p.name))
        except FileNotFoundError:
            continue
        except OSError as err:
            raise BackendUnavailable(f"cannot list {root} ({err})") from err
        for name in names:
            try:
                session = store.get(tenant, name) or store.rebuild(tenant, name)
            except (ValueError, CheckpointingError, BackendUnavailable) as err:
                log.warning("session %s/%s left out of the index: %s", tenant, name, err)
                continue
            if session is not None:
                yield index_row(session, store.event_log(tenant, name))


def rebuild_index(store: JsonlSessionStore) -> int:
    """Make the index again from one walk of the session folders; how many sessions it holds."""
    try:
        return store.index.rebuild(walk_rows(store))
    except (OSError, CheckpointingError) as err:
        raise BackendUnavailable(f"cannot rebuild the session index {store.index.path} ({err})") from err
    except Exception as err:  # sqlite3.Error: stdlib's, mapped at the boundary
        raise BackendUnavailable(f"cannot rebuild the session index {store.index.path} ({err})") from err


def _usable(store: JsonlSessionStore) -> bool:
    """Whether there is an index to read; rebuilds a missing, damaged or incomplete one first.
    False: no session was ever stored (nothing is made)."""
    health = store.index.health(count=False)
    if health.state == "ok":
        return True
    if health.state == "missing" and not tenants_root(store.base_dir).is_dir():
        return False
    with _rebuilding:  # many requests at once find it incomplete: one walk of the folders, not one each
        health = store.index.health(count=False)
        if health.state == "ok":
            return True
        log.warning(
            "the session index %s is %s; rebuilding it from the session folders (once)", store.index.path, health.state
        )
        rebuild_index(store)
    return True


def page_sessions(
    store: JsonlSessionStore,
    tenant_id: str,
    where: RowFilter = EVERY_ROW,
    *,
    after: str | None = None,
    limit: int | None = 20,
) -> SessionPage:
    """One page of the tenant's sessions by the index, newest activity first (see the module doc)."""
    if not _usable(store):
        if after is not None:
            _check_cursor(after)
        return SessionPage([], None)
    for _ in range(_ROUNDS):
        rows = _query(store, tenant_id, where, after, None if limit is None else limit + 1)
        more = limit is not None and len(rows) > limit
        rows = rows[:limit] if limit is not None else rows
        items, stale = _load(store, rows)
        if not stale:
            break
    nxt = store.index.cursor(items[-1].row) if more and items else None
    return SessionPage(items, nxt)


def _check_cursor(after: str) -> tuple[Any, str]:
    try:
        return decode_cursor(after, "activity")
    except BadCursor as err:
        raise InputError(f"{err}; pass the cursor a previous listing printed, or leave out --after") from None


def sql_page(
    sql: SqlSessionStore,
    jsonl: JsonlSessionStore,
    tenant_id: str,
    where: RowFilter = EVERY_ROW,
    *,
    after: str | None = None,
    limit: int | None = 20,
) -> SessionPage:
    """One page from a SQL session table that holds every session (it is the index there)."""
    key = None
    if after is not None:
        value, sid = _check_cursor(after)
        if not isinstance(value, int):
            raise InputError("not a paging cursor of this listing; pass the cursor a previous listing printed")
        key = (instant(value), sid)
    from agent.session.stores.sql_lazy_pg import LazyPgSessionStore

    store: object = sql
    more_one = None if limit is None else limit + 1
    if isinstance(store, LazyPgSessionStore):  # PostgreSQL read with psycopg, no SQLAlchemy
        got = store.sessions_page(tenant_id, where, after=key, limit=more_one)
    else:
        from agent.session.stores.sql_listing import sessions_page

        got = sessions_page(sql, tenant_id, where, after=key, limit=more_one)
    more = limit is not None and len(got) > limit
    items = []
    for session, at_read in got[:limit] if limit is not None else got:
        try:
            events: EventLog | None = jsonl.event_log(tenant_id, session.session_id)
            row = index_row(session, events)
        except (CheckpointingError, OSError, ValueError):
            row = index_row(session, None)
        session.refresh_status()
        items.append(Listed(session, replace(row, status=at_read, stored_status=row.status)))
    return SessionPage(items, items[-1].cursor if more and items else None)


def _query(
    store: JsonlSessionStore, tenant_id: str, where: RowFilter, after: str | None, limit: int | None
) -> list[SessionRow]:
    try:
        return store.index.page(tenant_id, where, after=after, limit=limit)
    except BadCursor as err:
        raise InputError(f"{err}; pass the cursor a previous listing printed, or leave out --after") from None
    except ValueError as err:
        raise InputError(str(err)) from None
    except IndexUnusable:
        rebuild_index(store)
        return store.index.page(tenant_id, where, after=after, limit=limit)


def _load(store: JsonlSessionStore, rows: list[SessionRow]) -> tuple[list[Listed], bool]:
    """The sessions of a page's rows; rows behind their session.json are corrected (True: some were)."""
    out: list[Listed] = []
    stale = False
    for row in rows:
        try:
            session = store.get(row.tenant_id, row.session_id) or store.rebuild(row.tenant_id, row.session_id)
        except (BackendUnavailable, CheckpointingError, ValueError) as err:
            log.warning("session %s listed from its index row only: %s", row.session_id, err)
            session = None
        if session is None:
            continue  # the folder is gone: the next rebuild drops the row
        if session.version > row.version and store.path(row.tenant_id, row.session_id).exists():
            fresh = index_row(session, store.event_log(row.tenant_id, row.session_id))
            store.index_put(fresh)
            stale = True
        if not row.meta.get("first_message") and session.loop_count:
            # A turn recorded after the session's last save (a crash mid-turn): the log has it.
            try:
                found = first_message(session, store.event_log(row.tenant_id, row.session_id))
                row = replace(row, meta={**row.meta, "first_message": found})
            except (CheckpointingError, OSError) as err:  # a damaged log still lists; the doctor explains it
                log.warning("session %s: first message not read from its log: %s", row.session_id, err)
        session.refresh_status()
        out.append(Listed(session, row))
    return out, stale


def search_rows(
    store: JsonlSessionStore, tenant_id: str, where: RowFilter = EVERY_ROW, *, count_only: bool = False, **paging: Any
) -> list[SessionRow] | int:
    """Rows (or their number) of the tenant matching `where`; `paging`: `SessionIndex.page`'s order,
    descending, limit and offset.

    For callers that need only what a row holds (the API's thread search): no session.json is read.
    """
    try:
        try:
            return store.index.count(tenant_id, where) if count_only else store.index.page(tenant_id, where, **paging)
        except IndexUnusable:  # the read checks the index itself: no look before each query
            if not _usable(store):
                return 0 if count_only else []
            return store.index.count(tenant_id, where) if count_only else store.index.page(tenant_id, where, **paging)
    except ValueError as err:
        raise InputError(str(err)) from None
