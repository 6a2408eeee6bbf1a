"""Which blobs a set of removed sessions leaves unreferenced, and their reclaim.

Blobs (`base_dir/blobs/sha256/...`, `checkpointing.blobs`) are content-addressed and shared: two
sessions, of one tenant or of two, that store the same bytes (the same tool result, the same file
in a sandbox room) hold one blob. Removing a session therefore removes only the blobs no remaining
session references. How that is decided, correctly and without reading the whole store:

1. Candidates: every `sha256:<hex>` in the removed sessions' files (records, checkpoints, pins;
   not the sandbox rooms' own files), plus, transitively, those inside candidate blobs that hold
   JSON (a spilled event payload may list a room manifest). This reads only what is removed.
2. Keepers: the remaining sessions' files are scanned for those candidates only, one session after
   the other, and the scan stops as soon as every candidate is known to be referenced. A ref
   found that is not a candidate is opened only when its blob holds JSON (first byte `{` / `[`),
   to see whether a candidate is referenced through it. The match is a byte search for
   `sha256:<hex>`: anything that looks like a reference keeps its blob (never the other way).
   No candidate (the sessions stored no blob): no scan at all.
3. A blob touched after the reclaim began is kept: `BlobStore.put` sets the time of a blob it
   finds already stored, so a run writing the same bytes meanwhile keeps it even if its record
   lands after the scan passed its session.

On the PostgreSQL record store the same three steps run over rows: the candidates are the
references in the removed sessions' rows (read before they are deleted), the keepers are searched
in every remaining record line and document body (keyset pages, `PostgresBlobStore.bodies`), and
"touched" is the row's time, which a put of bytes already stored sets (`delete_if_older`).

Cost: step 1 is O(bytes removed); step 2 is O(bytes of the remaining sessions' records) when a
candidate is in fact unreferenced (the common case: a tenant's own blobs), less when every
candidate is found early. It runs once per `erase` or `store gc`, never on a turn's path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from checkpointing.blobs import Blobs, BlobStore
from checkpointing.exceptions import BlobCorruptError, BlobMissingError
from checkpointing.layout import MAKING_PREFIX, ROOMS, WORKSPACE
from checkpointing.store.pg_blobs import PostgresBlobStore
from checkpointing.store.postgres import PostgresSessionStreams

_REF = re.compile(rb"sha256:([0-9a-f]{64})")
_CHUNK = 1 << 20
_OVERLAP = 70  # len("sha256:") + 64 - 1: a ref cut by a chunk boundary is seen whole in the next
_NOT_REFS = {WORKSPACE, ROOMS}


def _files(folder: Path) -> Iterator[Path]:
    """The files of a session folder that may hold references (not the rooms' own files)."""
    for root, dirs, files in os.walk(folder):
        if Path(root) == folder:
            dirs[:] = [d for d in dirs if d not in _NOT_REFS and not d.startswith(MAKING_PREFIX)]
        for name in files:
            yield Path(root) / name


def _scan(path: Path) -> set[str]:
    found: set[str] = set()
    try:
        with path.open("rb") as fh:
            tail = b""
            while chunk := fh.read(_CHUNK):
                buf = tail + chunk
                found.update("sha256:" + m.group(1).decode() for m in _REF.finditer(buf))
                tail = buf[-_OVERLAP:]
    except OSError:
        pass  # a file removed meanwhile holds no reference any more
    return found


def folder_refs(folder: Path) -> set[str]:
    """Every blob reference written in a session folder's files."""
    refs: set[str] = set()
    for path in _files(folder):
        refs |= _scan(path)
    return refs


def refs_in(data: bytes) -> set[str]:
    """Every blob reference written in `data`."""
    return {"sha256:" + m.group(1).decode() for m in _REF.finditer(data)}


def rows_refs(streams: PostgresSessionStreams) -> set[str]:
    """Every blob reference in a session's rows on the PostgreSQL store (streams and documents)."""
    lines, docs = streams.dump()
    refs: set[str] = set()
    for data in (*lines.values(), *docs.values()):
        refs |= refs_in(data)
    return refs


def _inner(store: Blobs, ref: str) -> set[str]:
    """The references inside blob `ref` when it holds JSON (else none)."""
    if not isinstance(store, BlobStore):
        try:
            data = store.get(ref)
        except (BlobMissingError, BlobCorruptError):
            return set()
        return refs_in(data) if data[:1] in (b"{", b"[") else set()
    try:
        path = store.path_for(ref)
        with path.open("rb") as fh:
            if fh.read(1) not in (b"{", b"["):
                return set()
    except (OSError, BlobMissingError):
        return set()
    return _scan(path)


def closure(store: Blobs, refs: Iterable[str]) -> set[str]:
    """`refs` and, transitively, the references inside those of them that hold JSON."""
    out = set(refs)
    todo = list(out)
    while todo:
        for inner in _inner(store, todo.pop()) - out:
            out.add(inner)
            todo.append(inner)
    return out


@dataclass
class Reclaim:
    """What a reclaim found and freed."""

    candidates: int = 0
    kept: int = 0
    deleted: list[str] = field(default_factory=list)
    bytes: int = 0


def reclaim(
    store: BlobStore, candidates: set[str], remaining: Iterable[Path], started: float, dry_run: bool
) -> Reclaim:
    """Delete the `candidates` that no folder of `remaining` references (see the module doc).

    `started`: when the removal began (unix time); a candidate touched since is kept.
    """
    out = Reclaim(candidates=len(candidates))
    open_ = {c for c in candidates if store.exists(c)}
    seen: set[str] = set()
    for folder in remaining:
        if not open_:
            break
        for path in _files(folder):
            for ref in _scan(path) - seen:
                seen.add(ref)
                open_ -= closure(store, [ref])  # the ref and what it references when it holds JSON
                if not open_:
                    break
    for ref in sorted(open_):
        try:
            path = store.path_for(ref)
            st = path.stat()
        except (OSError, BlobMissingError):
            continue
        if st.st_mtime >= started:
            continue
        out.deleted.append(ref)
        out.bytes += st.st_size if dry_run else store.delete(ref)
    out.kept = out.candidates - len(out.deleted)
    return out


def reclaim_rows(
    store: PostgresBlobStore,
    candidates: set[str],
    removed: set[tuple[str, str]],
    started: float,
    dry_run: bool,
) -> Reclaim:
    """`reclaim` on the PostgreSQL store: delete the `candidates` no remaining session's record
    line or document references (the sessions in `removed` are not searched: in a dry run their
    rows are still there), unless put again since unix time `started`."""
    out = Reclaim(candidates=len(candidates))
    open_ = {c for c in candidates if store.exists(c)}
    seen: set[str] = set()
    if open_:
        for tenant, thread, data in store.bodies():
            if (tenant, thread) in removed:
                continue
            for ref in refs_in(data) - seen:
                seen.add(ref)
                open_ -= closure(store, [ref])
            if not open_:
                break
    for ref in sorted(open_):
        size = store.delete_if_older(ref, started, dry_run)
        if size is not None:
            out.deleted.append(ref)
            out.bytes += size
    out.kept = out.candidates - len(out.deleted)
    return out
