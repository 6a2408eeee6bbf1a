"""The SQL of `checkpointing.session_index`: its tables, the UPSERT, the row select, a page's filters.

Private to that module. Every filter is a bound parameter (JSON paths included); every query's
first condition is the tenant.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from checkpointing.exceptions import CheckpointingError
from checkpointing.session_rows import SessionRow

MetaPath = tuple[str, ...]
Order = Literal["activity", "created", "session_id", "status"]


class BadCursor(CheckpointingError, ValueError):
    """A paging cursor that this index did not hand out."""


@dataclass(frozen=True)
class RowFilter:
    """Which of a tenant's rows a listing returns: every condition given must hold."""

    user_id: str | None = None
    status: str | None = None
    """The status at read (an expired live row reads as the expired status)."""
    meta: Sequence[tuple[MetaPath, Any]] = ()
    """Each JSON path of `meta` equals its value."""
    meta_any: Sequence[tuple[MetaPath, Sequence[Any]]] = ()
    """Each path holds one of the values."""
    meta_not: Sequence[tuple[MetaPath, Sequence[Any]]] = ()
    """Each path is absent or holds none of the values."""
    ids: Sequence[str] | None = None
    """Only these sessions (None: any)."""
    exclude_ids: Sequence[str] = ()
    """Never these sessions."""


EVERY_ROW = RowFilter()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def us(at: datetime | None) -> int | None:
    """Microseconds since the epoch, exactly (no float: a cursor must name the very same instant)."""
    if at is None:
        return None
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at
    return (at - _EPOCH) // _MICRO


def at(us: int | None) -> datetime | None:
    """The instant `us` (microseconds since the epoch) names, tz-aware UTC."""
    return None if us is None else _EPOCH + timedelta(microseconds=us)


def encode_cursor(order: Order, value: Any, session_id: str) -> str:
    """The opaque cursor after a row (`order` key's value and the session id)."""
    raw = json.dumps([order, value, session_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, order: Order) -> tuple[Any, str]:
    """(sort value, session id) of a cursor made by `encode_cursor` for the same order; else `BadCursor`."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        got, value, sid = json.loads(raw)
    except (ValueError, TypeError) as err:
        raise BadCursor(f"not a paging cursor: {cursor[:80]!r}") from err
    if got != order or not isinstance(sid, str) or not isinstance(value, (int, str)):
        raise BadCursor(f"not a paging cursor of this listing: {cursor[:80]!r}")
    return value, sid


SCHEMA_SQL = """
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS index_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    tenant_id TEXT NOT NULL, session_id TEXT NOT NULL, user_id TEXT NOT NULL,
    status TEXT NOT NULL, created_us INTEGER NOT NULL, active_us INTEGER NOT NULL,
    expires_us INTEGER, version INTEGER NOT NULL, meta TEXT NOT NULL,
    touched_us INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, session_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_sessions_activity ON sessions (tenant_id, active_us, session_id);
CREATE INDEX IF NOT EXISTS ix_sessions_user ON sessions (tenant_id, user_id, active_us, session_id);
CREATE INDEX IF NOT EXISTS ix_sessions_status ON sessions (tenant_id, status, active_us, session_id);
CREATE INDEX IF NOT EXISTS ix_sessions_expires ON sessions (expires_us);
INSERT OR IGNORE INTO index_info VALUES ('schema', '1');
COMMIT;
"""
"""The index file's tables, made on the first write (`SessionIndex._conn(create=True)`)."""

UPSERT = """
INSERT INTO sessions (tenant_id, session_id, user_id, status, created_us, active_us, expires_us, version, meta,
                      touched_us)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET
    user_id = excluded.user_id, status = excluded.status, created_us = excluded.created_us,
    active_us = excluded.active_us, expires_us = excluded.expires_us, version = excluded.version,
    meta = excluded.meta, touched_us = excluded.touched_us
WHERE excluded.version >= sessions.version
"""

SELECT = (
    "tenant_id, session_id, user_id, status, created_us, active_us, expires_us, version, meta, "
    "CASE WHEN status = ? AND expires_us IS NOT NULL AND expires_us <= ? THEN ? ELSE status END AS effective_status"
)


def json_path(path: MetaPath) -> str:
    for seg in path:
        if not seg or '"' in seg or "\\" in seg:
            raise ValueError(f"metadata key {seg!r} cannot be searched (empty, or holds a quote or backslash)")
    return "$" + "".join(f'."{seg}"' for seg in path)


def bindable(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)  # json_extract reads JSON true/false as 1/0
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value


def filters_sql(tenant_id: str, where: RowFilter) -> tuple[str, list[Any]]:
    """The WHERE clause (tenant first) and its bound arguments of `where`."""
    parts, args = ["tenant_id = ?"], [tenant_id]
    if where.user_id is not None:
        parts.append("user_id = ?")
        args.append(where.user_id)
    if where.status is not None:
        parts.append("effective_status = ?")
        args.append(where.status)
    for path, value in where.meta:
        parts.append("json_extract(meta, ?) IS ?")
        args += [json_path(path), bindable(value)]
    for path, values in where.meta_any:
        if not values:
            parts.append("0")
            continue
        parts.append(f"json_extract(meta, ?) IN ({', '.join('?' * len(values))})")
        args += [json_path(path), *(bindable(v) for v in values)]
    for path, values in where.meta_not:
        marks = ", ".join("?" * len(values)) or "NULL"
        parts.append(f"(json_extract(meta, ?) IS NULL OR json_extract(meta, ?) NOT IN ({marks}))")
        args += [json_path(path), json_path(path), *(bindable(v) for v in values)]
    if where.ids is not None:
        wanted = list(where.ids)
        parts.append(f"session_id IN ({', '.join('?' * len(wanted))})" if wanted else "0")
        args += wanted
    skip = list(where.exclude_ids)
    if skip:
        parts.append(f"session_id NOT IN ({', '.join('?' * len(skip))})")
        args += skip
    return " AND ".join(parts), args


def row_of(r: Sequence[Any]) -> SessionRow:
    """The `SessionRow` of a result row of `SELECT`."""
    tenant, sid, user, stored, created, active, expires, version, meta, status = r
    return SessionRow(
        tenant_id=tenant,
        session_id=sid,
        user_id=user,
        status=status,
        created_at=at(created) or datetime.fromtimestamp(0, UTC),
        last_activity=at(active) or datetime.fromtimestamp(0, UTC),
        expires_at=at(expires),
        version=version,
        meta=json.loads(meta),
        stored_status=stored,
    )
