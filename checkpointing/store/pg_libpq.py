"""The append's statements sent to libpq as they are, without psycopg's adaptation.

An append of one line is the store's hottest statement: adapting its seven parameters through
psycopg (a cursor, a dumper per value, the result's loaders) costs the client as much CPU as the
server spends on the whole append. Here the values are already bytes (text format, the line in
binary), the statement goes by `PQexecParams` on the connection's libpq handle: one round trip, an
unnamed statement, so nothing outlives it (as psycopg sends it with `prepare_threshold=None`:
PgBouncer's transaction pooling is safe). Errors come out as psycopg raises them: a lost
connection is an `OperationalError`, a collision on the rows' key a `UniqueViolation`.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import pq

from checkpointing.store.pg_schema import MOVED

APPEND_TYPES = [25, 25, 25, 20, 17, 1001, 16]
"""`jsonl_append`'s parameter types: tenant, thread, run (text), token (bigint), the line (bytea),
more lines (bytea[], always NULL here), fsync quick (boolean)."""
APPEND_AT_TYPES = [25, 25, 20, 20, 20, 17, 16]
"""`jsonl_append_at`'s: tenant, thread (text), token, stream row id, end (bigint), the line
(bytea), fsync quick (boolean)."""
_APPEND_FORMATS = [0, 0, 0, 0, 1, 0, 0]
_APPEND_AT_FORMATS = [0, 0, 0, 0, 0, 1, 0]
_RETRY = {MOVED.encode(), psycopg.errors.UniqueViolation.sqlstate.encode()}  # type: ignore[union-attr]


def append(conn: psycopg.Connection[Any], query: bytes, args: list[Any]) -> tuple[Any, Any]:
    """`CALL jsonl_append(...)` (`query`, `args` as `APPEND_TYPES` says): its (stream id, start)
    as bytes, (None, None) when the fence is not at the token."""
    res = conn.pgconn.exec_params(query, args, APPEND_TYPES, _APPEND_FORMATS)
    if res.status == pq.ExecStatus.TUPLES_OK:
        return res.get_value(0, 0), res.get_value(0, 1)
    raise _error(conn, res)


def append_at(conn: psycopg.Connection[Any], query: bytes, args: list[Any]) -> bool:
    """`CALL jsonl_append_at(...)` (`query`, `args` as `APPEND_AT_TYPES` says): True when the
    line went in; False, nothing written, when the stream did not end there, the fence was not at
    the token or another append took that end (the writer runs `jsonl_append` instead)."""
    res = conn.pgconn.exec_params(query, args, APPEND_AT_TYPES, _APPEND_AT_FORMATS)
    if res.status == pq.ExecStatus.COMMAND_OK:
        return True
    if res.status == pq.ExecStatus.FATAL_ERROR and res.error_field(pq.DiagnosticField.SQLSTATE) in _RETRY:
        return False
    raise _error(conn, res)


def _error(conn: psycopg.Connection[Any], res: pq.abc.PGresult) -> psycopg.Error:
    if conn.pgconn.status == pq.ConnStatus.BAD:
        return psycopg.OperationalError(res.get_error_message("utf-8") or "the connection was lost")
    return psycopg.errors.error_from_result(res)
