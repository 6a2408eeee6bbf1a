"""An append-only entry tree per session: its store's EVENTS stream, on the `files` store the file
`tenants/<tenant>/sessions/<session>/events.jsonl`.

The log knows no entry types or header fields of its own: its owner passes an `EventSchema` (the
entry types it allows, the fields of its header line, in order). Line 1 is the header
`{kind: "header", schema_version, <the schema's header fields>}` (always with tenant_id and
session_id, checked against the log's session). Every later line is an entry `{id, parent_id,
branch_id, type, ts, payload}` (plus `fence` when the writer holds a lease token: an append
carrying a token lower than the session's highest seen raises `StaleFencingTokenError`, checked
by the store with the append: `checkpointing.fencing` on files). Ids are UUIDv7 strings, so
"newer" is "larger". A payload whose canonical JSON is larger than `inline_payload_max_bytes` is
stored in the blob store and the entry keeps only `{"$blob": "sha256:...", "size": N}`; reads
resolve it.

Entries are never rewritten. A branch is a path: `path_to_root(leaf)` walks parents up to the
root, so forking (appending, on a new branch_id, an entry whose parent is an earlier entry)
changes only which path later history hangs off, never the entries of the original branch.

Where the lines live is the store's (`checkpointing.store`, stream `EVENTS` of a
`SessionStreams`): `EventLog(base_dir, tenant, session)` is the log on the `files` store of
`base_dir`, byte for byte the file it always was (its persisted index `events.jsonl.idx`);
`EventLog.over(streams, blobs)` the log of any store's session (PostgreSQL: rows of stream
`@events`). Framing, checksums and the torn-tail rule are those of `checkpointing.records`.

The log is its session's handle for recording: `append` writes an entry at once (to the store's
`SessionStreams.append`), `commit` asks the store to make the appends durable
(`SessionStreams.commit`); its owner needs nothing else of the store to record.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checkpointing._events_index import Rec, StreamIndex
from checkpointing._events_types import ANY_EVENTS, SCHEMA_VERSION, Entry, EventSchema, new_entry_id
from checkpointing.blobs import BLOB_KEY, Blobs, BlobStore, is_blob_ref
from checkpointing.commit_group import TIER_EVENTS, CommitGroup
from checkpointing.exceptions import CorruptRecordError
from checkpointing.ids import validate_id
from checkpointing.layout import session_dir
from checkpointing.records import FsyncPolicy, canonical_json, dumps, encode_record, frame, read_first_record
from checkpointing.store.base import EVENTS, SessionStreams
from checkpointing.store.files import FileSessionStreams


class EventLog:
    """One session's event log with an in-memory index (appends never re-read the stream).

    Thread-safe within a process. Entries appended by another process are picked up on the next
    call (the index catches up from the last byte it knows). `schema` (an `EventSchema`, given by
    the log's owner) says which entry types `append` accepts and what the header holds. Opening a
    log verifies every line's checksum but indexes only each entry's envelope (id, parent, branch,
    type); a payload is parsed when an entry is read, so questions about the tail (`last`,
    `newest`, `branches`, a projection filtered by type) do not decode the whole history.
    Corruption other than a torn last line raises `CorruptRecordError` naming the stream (the
    file) and line.

    `EventLog(base_dir, tenant_id, session_id, ...)` is the log on the `files` store of
    `base_dir` (appends durable per `fsync`, joining commit group `group` at `tier`); `over`
    opens it on any store. `commits`: what `commit` does outside a held session ("always": make
    every append durable; else nothing, the OS writes it).
    """

    def __init__(
        self,
        base_dir: Path | str,
        tenant_id: str,
        session_id: str,
        inline_payload_max_bytes: int = 8192,
        fsync: FsyncPolicy = "always",
        blobs: Blobs | None = None,
        group: CommitGroup | None = None,
        tier: int = TIER_EVENTS,
        schema: EventSchema = ANY_EVENTS,
        commits: FsyncPolicy = "always",
    ) -> None:
        directory = session_dir(base_dir, tenant_id, session_id)
        streams = FileSessionStreams(directory, tenant_id, session_id, fsync, group, tiers={EVENTS: tier})
        self._attach(streams, blobs or BlobStore(base_dir), inline_payload_max_bytes, fsync, schema, commits)
        self.base_dir: Path | None = Path(base_dir)

    @classmethod
    def over(
        cls,
        streams: SessionStreams,
        blobs: Blobs,
        *,
        inline_payload_max_bytes: int = 8192,
        fsync: FsyncPolicy | None = None,
        schema: EventSchema = ANY_EVENTS,
        commits: FsyncPolicy = "always",
    ) -> EventLog:
        """The event log of session `streams` (of any store: `Store.session(tenant, session,
        fsync)`), large payloads in `blobs`; appends durable per `fsync` (None: the streams'),
        `commit` per `commits`."""
        validate_id(streams.tenant, "tenant id")
        validate_id(streams.thread, "session id")
        log = cls.__new__(cls)
        log._attach(streams, blobs, inline_payload_max_bytes, fsync, schema, commits)
        log.base_dir = None
        return log

    def _attach(
        self,
        streams: SessionStreams,
        blobs: Blobs,
        inline_payload_max_bytes: int,
        fsync: FsyncPolicy | None,
        schema: EventSchema,
        commits: FsyncPolicy,
    ) -> None:
        self.streams = streams
        """Where the log's lines are (its stream `EVENTS`)."""
        self.schema = schema
        self.tenant_id = streams.tenant
        self.session_id = streams.thread
        self.path = streams.path(EVENTS)
        """The log's name in messages (on the `files` store: its file)."""
        self.inline_payload_max_bytes = inline_payload_max_bytes
        self.blobs = blobs
        self._policy = fsync
        self._commits = commits
        self._lock = threading.RLock()
        self._ix = StreamIndex(streams, self.path)

    def save_index(self) -> None:
        """Persist the index beside the log (when this process appended since it last did), so
        the next process to open the log scans only what was appended after."""
        with self._lock:
            self._ix.save()

    def _load(self) -> StreamIndex:
        self._ix.load()
        return self._ix

    # -- header -------------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the log exists (a session header was written, or is being)."""
        return self.streams.head(EVENTS)[1] != 0

    def create(self, header: dict[str, Any]) -> dict[str, Any]:
        """Write the header line of a new log (the schema's header fields, from `header`); refuses
        when the log already exists."""
        rec: dict[str, Any] = {"kind": "header", "schema_version": SCHEMA_VERSION}
        for name in self.schema.header_fields:
            rec[name] = header.get(name)
        if "created_at" in rec:
            rec["created_at"] = rec["created_at"] or _now()
        if rec["tenant_id"] != self.tenant_id or rec["session_id"] != self.session_id:
            raise ValueError("header tenant_id/session_id must match the log's path")
        with self._lock:
            # Of two processes creating the same session, exactly one wins.
            if not self.streams.create(EVENTS, [encode_record(rec)], self._policy):
                raise FileExistsError(
                    f"{self.path} already exists: session {self.session_id} has an event log; "
                    "open it instead of creating it"
                )
            self._ix.reset()
            self._load()
            return dict(rec)

    def header(self) -> dict[str, Any] | None:
        """The header record, or None when the log does not exist."""
        with self._lock:
            header = self._load().header
            return dict(header) if header is not None else None

    # -- append -------------------------------------------------------------------------------

    def append(
        self,
        type: str,
        payload: dict[str, Any] | None = None,
        parent_id: str | None = None,
        branch_id: str = "main",
        fencing_token: int | None = None,
    ) -> Entry:
        """Append one entry and return it. The parent must exist (None only for a root entry)."""
        self.schema.check_type(type)
        validate_id(branch_id, "branch id")
        body = dict(payload or {})
        if is_blob_ref(body) or BLOB_KEY in body:
            raise ValueError(f"an event payload may not use the reserved key {BLOB_KEY!r}")
        with self._lock:
            ix = self._load()
            if ix.header is None:
                raise FileNotFoundError(f"{self.path} has no header: create the session's event log before appending")
            if parent_id is not None and parent_id not in ix.tree.records:
                raise KeyError(f"parent entry {parent_id} is not in {self.path}")
            rec: dict[str, Any] = {
                "id": new_entry_id(),
                "parent_id": parent_id,
                "branch_id": branch_id,
                "type": type,
                "ts": _now(),
                "payload": body,
            }
            if fencing_token is not None:
                rec["fence"] = fencing_token
            raw = dumps(rec)
            if len(raw) > self.inline_payload_max_bytes:  # else the payload, a part of it, is small enough
                rec["payload"] = self._store_payload(body)
                raw = dumps(rec)
            framed = frame(raw)
            offs, _, durable = self.streams.append(EVENTS, [framed], self._policy, fencing_token)
            if durable is not None:
                durable()
            ix.note_append(rec, offs[0], framed)
            return self._resolve(rec)

    def _store_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        data = canonical_json(payload)
        if len(data) > self.inline_payload_max_bytes:
            return self.blobs.ref_obj(data)
        return payload

    # -- reads --------------------------------------------------------------------------------

    def _resolve(self, rec: dict[str, Any] | Rec) -> Entry:
        if isinstance(rec, Rec):
            rec = self._ix.full(rec)
        payload = rec.get("payload") or {}
        if is_blob_ref(payload):
            loaded = json.loads(self.blobs.get(payload[BLOB_KEY]).decode("utf-8"))
            if not isinstance(loaded, dict):
                raise CorruptRecordError(str(self.path), -1, f"blob payload of entry {rec['id']} is not an object")
            payload = loaded
        fence = rec.get("fence")
        return Entry(
            id=rec["id"],
            parent_id=rec.get("parent_id"),
            branch_id=rec["branch_id"],
            type=rec["type"],
            ts=rec.get("ts", ""),
            payload=payload,
            fence=fence if isinstance(fence, int) else None,
        )

    def entries(self, types: frozenset[str] | set[str] | None = None) -> list[Entry]:
        """Every entry in append order, payloads resolved (with `types`, only entries of those
        types: the others are skipped without reading their payloads)."""
        with self._lock:
            t = self._load().tree
            recs = self._ix.with_bodies([t.records[i] for i in t.order if types is None or t.records[i].type in types])
            return [self._resolve(r) for r in recs]

    def newest(self, types: frozenset[str] | set[str], where: Mapping[str, Any] | None = None) -> Entry | None:
        """The newest entry of one of `types` (whose payload holds every item of `where`, when
        given), or None.

        Reads the log from its end and parses only the payloads of entries of those types.
        """
        with self._lock:
            t = self._load().tree
            for i in reversed(t.order):
                rec = t.records[i]
                if rec.type in types:
                    entry = self._resolve(rec)
                    payload = entry.payload or {}
                    if where is None or all(payload.get(k, _ABSENT) == v for k, v in where.items()):
                        return entry
            return None

    def raw_entries(self) -> list[dict[str, Any]]:
        """Every entry as stored (blob references unresolved), in append order."""
        with self._lock:
            t = self._load().tree
            return [self._ix.full(r) for r in self._ix.with_bodies([t.records[i] for i in t.order])]

    def envelopes(self) -> list[dict[str, Any]]:
        """Every entry's `{id, parent_id, branch_id, type}` in append order (no payload is read)."""
        with self._lock:
            t = self._load().tree
            return [_envelope(t.records[i]) for i in t.order]

    def envelope(self, entry_id: str) -> dict[str, Any]:
        """One entry's `{id, parent_id, branch_id, type}` (KeyError when absent; no payload is read)."""
        with self._lock:
            t = self._load().tree
            return _envelope(t.records[entry_id])

    def raw(self, entry_id: str) -> dict[str, Any]:
        """The entry as stored (blob references unresolved)."""
        with self._lock:
            return self._ix.full(self._rec(entry_id))

    def has(self, entry_id: str) -> bool:
        """Whether the entry exists."""
        with self._lock:
            t = self._load().tree
            return entry_id in t.records

    def entry(self, entry_id: str) -> Entry:
        """One entry by id (KeyError when absent)."""
        with self._lock:
            return self._resolve(self._rec(entry_id))

    def _rec(self, entry_id: str) -> Rec:
        t = self._load().tree
        if entry_id not in t.records:
            raise KeyError(f"entry {entry_id} is not in {self.path}")
        return t.records[entry_id]

    def children(self, entry_id: str | None) -> list[Entry]:
        """The entries whose parent is `entry_id` (None: the roots), in append order."""
        with self._lock:
            t = self._load().tree
            return [self._resolve(t.records[i]) for i in t.children.get(entry_id, [])]

    def path_to_root(self, leaf_id: str | None, types: frozenset[str] | None = None) -> list[Entry]:
        """The branch projection: entries from `leaf_id` up to the root, leaf first.

        With `types`, only entries of those types are returned (others are walked, not resolved,
        so a history of a few types never reads the blobs of the large payloads of others).
        """
        with self._lock:
            t = self._load().tree
            out: list[Entry] = []
            seen: set[str] = set()
            cur = leaf_id
            while cur is not None:
                if cur in seen or cur not in t.records:
                    raise CorruptRecordError(str(self.path), -1, f"broken parent chain at entry {cur}")
                seen.add(cur)
                rec = t.records[cur]
                if types is None or rec.type in types:
                    out.append(self._resolve(rec))
                cur = rec.parent_id
            return out

    def projection(self, leaf_id: str | None, types: frozenset[str] | None = None) -> list[Entry]:
        """The branch history in chronological order (root first, `leaf_id` last); see `path_to_root`."""
        return list(reversed(self.path_to_root(leaf_id, types)))

    def branches(self) -> dict[str, str]:
        """Every branch id with its newest entry id."""
        with self._lock:
            t = self._load().tree
            return dict(t.branch_leaf)

    def branch_stats(self) -> dict[str, tuple[str, int]]:
        """Every branch id with its first entry's id and its number of entries (nothing parsed)."""
        with self._lock:
            t = self._load().tree
            return {b: (t.branch_first[b], n) for b, n in t.branch_count.items()}

    def branch_leaf(self, branch_id: str) -> str | None:
        """The newest entry appended on `branch_id`, or None."""
        with self._lock:
            t = self._load().tree
            return t.branch_leaf.get(branch_id)

    def last(self, n: int = 10) -> list[Entry]:
        """The `n` newest entries in append order."""
        with self._lock:
            t = self._load().tree
            return [self._resolve(t.records[i]) for i in t.order[-n:]] if n > 0 else []

    def sync(self) -> None:
        """Make every append so far durable (for `fsync="batch"`)."""
        self.streams.sync(EVENTS)

    def commit(self) -> None:
        """Make the appends so far durable by the store's `commit` (a held session: after the
        checkpoint data written before them), unless `commits` is not "always" and nothing is held."""
        if self._commits == "always" or self.streams.held:
            self.streams.commit(EVENTS)


_ABSENT = object()


def _envelope(r: Rec) -> dict[str, Any]:
    return {"id": r.id, "parent_id": r.parent_id, "branch_id": r.branch_id, "type": r.type}


def _now() -> str:
    return datetime.now(UTC).isoformat()


def read_header(path: Path) -> dict[str, Any] | None:
    """The header of an events.jsonl file without indexing the rest (None when missing/empty; a
    torn or damaged header line is `CorruptRecordError`, see `records.read_first_record`)."""
    rec = read_first_record(path)
    if rec is None:
        return None
    if rec.get("kind") != "header":
        raise CorruptRecordError(str(path), 1, "the first record is not the session header")
    return rec


__all__ = ["ANY_EVENTS", "SCHEMA_VERSION", "Entry", "EventLog", "EventSchema", "new_entry_id", "read_header"]
