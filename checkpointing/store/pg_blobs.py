"""The PostgreSQL store's blobs: one row per blob in `jsonl_blobs` (ref, body, size, created_at).

    blobs = PostgresStore(url).blobs          # the same pool as the store's records
    ref = blobs.put(data)                     # 'sha256:<hex>'
    assert blobs.get(ref) == data             # verified against the digest

A put is one statement, `INSERT ... ON CONFLICT (ref) DO UPDATE SET created_at = now()`:
processes putting the same bytes at once all succeed and one row stays (the second insert waits
for the first to commit, then only sets the time). That time is what a reclaim checks
(`delete_if_older`): a blob put again after a reclaim began is kept, as a file's time is on the
`files` store. Nothing session-scoped (no advisory locks; the pool's connections run no
prepared statements), so it works behind PgBouncer in transaction pooling mode. A read verifies the
row's bytes against the reference: a damaged row is `BlobCorruptError`, never returned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from checkpointing.blobs import BLOB_KEY, blob_ref, ref_hex, verified
from checkpointing.exceptions import BlobMissingError, StoreUnavailableError

if TYPE_CHECKING:
    from checkpointing.store.postgres import PostgresStore

_PAGE = 1000
"""References read per query while listing (keyset pages: no cursor held between queries)."""
_Q = {
    "put": (
        "INSERT INTO {s}.jsonl_blobs (ref, body, size) VALUES (%s, %s, %s)"
        " ON CONFLICT (ref) DO UPDATE SET created_at = now()"
    ),
    "delete_older": "DELETE FROM {s}.jsonl_blobs WHERE ref = %s AND created_at < to_timestamp(%s) RETURNING size",
    "size_older": "SELECT size FROM {s}.jsonl_blobs WHERE ref = %s AND created_at < to_timestamp(%s)",
    "lines": (
        "SELECT r.stream, r.pos, s.tenant, s.thread, r.line FROM {s}.jsonl_records r"
        " JOIN {s}.jsonl_streams s ON s.id = r.stream WHERE (r.stream, r.pos) > (%s, %s)"
        " ORDER BY r.stream, r.pos LIMIT %s"
    ),
    "docs": (
        "SELECT tenant, thread, name, body FROM {s}.jsonl_documents WHERE (tenant, thread, name) > (%s, %s, %s)"
        " ORDER BY tenant, thread, name LIMIT %s"
    ),
    "get": "SELECT body FROM {s}.jsonl_blobs WHERE ref = %s",
    "exists": "SELECT 1 FROM {s}.jsonl_blobs WHERE ref = %s",
    "delete": "DELETE FROM {s}.jsonl_blobs WHERE ref = %s RETURNING size",
    "refs": "SELECT ref FROM {s}.jsonl_blobs WHERE ref > %s ORDER BY ref LIMIT %s",
}


class PostgresBlobStore:
    """Blobs as rows of `jsonl_blobs` in the store's schema (see the module docstring); made by
    `PostgresStore.blobs`, whose `setup()` creates the table."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        s = sql.Identifier(store.schema)
        self.q = {k: sql.SQL(v).format(s=s).as_bytes(None) for k, v in _Q.items()}

    def where(self, ref: str) -> str:
        """Where blob `ref` is, for messages."""
        return f"{self.store.label}/jsonl_blobs/{ref}"

    def _run(self, what: str, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self.store.connection(what) as conn:
            try:
                cur = conn.execute(self.q[query], params)
            except psycopg.errors.UndefinedTable as err:
                raise StoreUnavailableError(
                    f"{self.store.name}: table jsonl_blobs is missing; run PostgresStore.setup() "
                    "(or apply checkpointing.store.pg_schema.ddl())"
                ) from err
            return cur.fetchall() if cur.description else []

    def put(self, data: bytes) -> str:
        """Insert the row unless it is there (idempotent under concurrency); returns the reference."""
        ref = blob_ref(data)
        self._run("storing a blob", "put", (ref, data, len(data)))
        return ref

    def get(self, ref: str) -> bytes:
        """The row's bytes, verified against `ref`."""
        ref_hex(ref)
        rows = self._run("reading a blob", "get", (ref,))
        if not rows:
            raise BlobMissingError(
                f"blob {ref} is missing ({self.where(ref)}); restore it from a backup of the database"
            )
        return verified(ref, bytes(rows[0][0]), self.where(ref))

    def exists(self, ref: str) -> bool:
        """Whether the row is there (not verified)."""
        ref_hex(ref)
        return bool(self._run("checking a blob", "exists", (ref,)))

    def delete_if_older(self, ref: str, started: float, dry_run: bool = False) -> int | None:
        """Delete the row unless it was put at or after unix time `started` (`dry_run`: only say);
        its size, or None when it is not there or newer."""
        ref_hex(ref)
        rows = self._run("reclaiming a blob", "size_older" if dry_run else "delete_older", (ref, started))
        return int(rows[0][0]) if rows else None

    def bodies(self) -> Iterator[tuple[str, str, bytes]]:
        """Every record line and document body of the store, as (tenant, thread, bytes), in keyset
        pages (no cursor held between queries): what a reclaim searches for references."""
        after: tuple[Any, ...] = (0, -1)
        while True:
            rows = self._run("reading records", "lines", (*after, _PAGE))
            for _, _, tenant, thread, line in rows:
                yield str(tenant), str(thread), bytes(line)
            if len(rows) < _PAGE:
                break
            after = (rows[-1][0], rows[-1][1])
        key: tuple[Any, ...] = ("", "", "")
        while True:
            rows = self._run("reading documents", "docs", (*key, _PAGE))
            for tenant, thread, _, body in rows:
                yield str(tenant), str(thread), bytes(body)
            if len(rows) < _PAGE:
                break
            key = tuple(rows[-1][:3])

    def delete(self, ref: str) -> int:
        """Delete the row; returns its size (0 when it was not there)."""
        ref_hex(ref)
        rows = self._run("deleting a blob", "delete", (ref,))
        return int(rows[0][0]) if rows else 0

    def ref_obj(self, data: bytes) -> dict[str, Any]:
        """Store `data` and return the reference object records embed."""
        return {BLOB_KEY: self.put(data), "size": len(data)}

    def refs(self) -> Iterator[str]:
        """Every row's reference, in order, a page per query."""
        last = ""
        while True:
            page = [str(r) for (r,) in self._run("listing blobs", "refs", (last, _PAGE))]
            yield from page
            if len(page) < _PAGE:
                return
            last = page[-1]
