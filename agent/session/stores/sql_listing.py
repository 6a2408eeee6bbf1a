"""Listing sessions from the SQL session table, where it holds every session (MIRROR, or PRIMARY on
a server database): that table is the index, one query with ORDER BY / LIMIT, no second table.

The listing columns (`expires_at`, `meta`; migration 0002) are written by `SqlSessionStore.put`
with the document. The filters are `checkpointing.session_index.RowFilter`s, with the same meaning
as in `SessionIndex.page`: every query binds the tenant; an ACTIVE row whose `expires_at` has passed reads
EXPIRED (in the query, so filters and the returned status agree); `meta` paths compare JSON values
(`jsonb` on PostgreSQL, `json_extract` on SQLite).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from agent.core.statuses import SessionStatus
from agent.session.session import ChatSession
from checkpointing.session_index import EVERY_ROW, MetaPath, Order, RowFilter, SessionRow

if TYPE_CHECKING:
    from agent.session.stores.sql import SqlSessionStore

LIVE, EXPIRED = SessionStatus.ACTIVE.value, SessionStatus.EXPIRED.value


def _effective(t: sa.Table) -> sa.ColumnElement[Any]:
    now = datetime.now(UTC)
    return sa.case(
        (sa.and_(t.c.status == LIVE, t.c.expires_at.is_not(None), t.c.expires_at <= now), sa.literal(EXPIRED)),
        else_=t.c.status,
    )


def _json_at(store: SqlSessionStore, path: MetaPath) -> sa.ColumnElement[Any]:
    t = store.sessions
    if store.engine.dialect.name == "postgresql":
        return sa.cast(t.c.meta, JSONB).op("#>")(sa.cast(list(path), ARRAY(sa.Text)))
    for seg in path:
        if '"' in seg or "\\" in seg:
            raise ValueError(f"metadata key {seg!r} cannot be searched (it holds a quote or backslash)")
    return sa.func.json_extract(t.c.meta, "$" + "".join(f'."{seg}"' for seg in path))


def _value(store: SqlSessionStore, value: Any) -> Any:
    if store.engine.dialect.name == "postgresql":
        return sa.cast(sa.literal(json.dumps(value), sa.Text), JSONB)  # JSONB's own binding would encode twice
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value


def filtered(store: SqlSessionStore, q: sa.Select[Any], tenant_id: str, where: RowFilter) -> sa.Select[Any]:
    """`q` with the conditions of `where` (the tenant always first)."""
    t = store.sessions
    q = q.where(t.c.tenant_id == tenant_id)
    if where.user_id is not None:
        q = q.where(t.c.user_id == where.user_id)
    if where.status is not None:
        q = q.where(_effective(t) == where.status)
    for path, value in where.meta:
        q = q.where(_json_at(store, path) == _value(store, value))
    for path, values in where.meta_any:
        q = q.where(sa.or_(sa.false(), *(_json_at(store, path) == _value(store, v) for v in values)))
    for path, values in where.meta_not:
        at = _json_at(store, path)
        q = q.where(sa.or_(at.is_(None), sa.and_(sa.true(), *(at != _value(store, v) for v in values))))
    if where.ids is not None:
        q = q.where(t.c.session_id.in_(list(where.ids)))
    skip = list(where.exclude_ids)
    if skip:
        q = q.where(t.c.session_id.not_in(skip))
    return q


def sessions_page(
    store: SqlSessionStore,
    tenant_id: str,
    where: RowFilter = EVERY_ROW,
    *,
    after: tuple[datetime, str] | None = None,
    limit: int | None = 20,
) -> list[tuple[ChatSession, str]]:
    """(session, status at read) of one page, newest activity first; `after`: the previous page's last
    (last_active_time, session_id)."""
    if not store.exists():
        return []
    t = store.sessions
    q = filtered(store, sa.select(t.c.session_id, t.c.data, _effective(t)), tenant_id, where)
    if after is not None:
        q = q.where(sa.tuple_(t.c.last_active_time, t.c.session_id) < sa.tuple_(after[0], after[1]))
    q = q.order_by(t.c.last_active_time.desc(), t.c.session_id.desc())
    if limit is not None:
        q = q.limit(limit)
    with store.transaction("list sessions") as conn:
        rows = conn.execute(q).all()
    out = [(store.decode(data, tenant_id, sid), str(st)) for sid, data, st in rows]
    return [(s, st) for s, st in out if s.tenant_id == tenant_id]


_ORDER = {"activity": "last_active_time", "created": "created_at", "session_id": "session_id", "status": "status"}


def search(
    store: SqlSessionStore,
    tenant_id: str,
    where: RowFilter = EVERY_ROW,
    *,
    count_only: bool = False,
    order: Order = "activity",
    descending: bool = True,
    limit: int | None = 20,
    offset: int = 0,
) -> list[SessionRow] | int:
    """Rows (from the listing columns, no document decoded) or their number, as `SessionIndex.page`."""
    if not store.exists():
        return 0 if count_only else []
    t = store.sessions
    if count_only:
        q = filtered(store, sa.select(sa.func.count()).select_from(t), tenant_id, where)
        with store.transaction("count sessions") as conn:
            return int(conn.execute(q).scalar_one())
    cols = (t.c.session_id, t.c.user_id, _effective(t), t.c.status, t.c.created_at, t.c.last_active_time)
    q = filtered(store, sa.select(*cols, t.c.expires_at, t.c.version, t.c.meta), tenant_id, where)
    key = _effective(t) if order == "status" else t.c[_ORDER[order]]
    q = q.order_by(*((key.desc(), t.c.session_id.desc()) if descending else (key.asc(), t.c.session_id.asc())))
    q = q.offset(offset)
    if limit is not None:
        q = q.limit(limit)
    with store.transaction("search sessions") as conn:
        rows = conn.execute(q).all()
    return [
        SessionRow(
            tenant_id=tenant_id,
            session_id=sid,
            user_id=user,
            status=str(st),
            created_at=_aware(created),
            last_activity=_aware(active),
            expires_at=_aware(expires) if expires is not None else None,
            version=version,
            meta=json.loads(meta) if meta else {},
            stored_status=stored,
        )
        for sid, user, st, stored, created, active, expires, version, meta in rows
    ]


def _aware(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts
