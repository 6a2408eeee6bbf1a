"""Content-addressed blobs: the `Blobs` interface, and its files backend `BlobStore`
(`blobs/sha256/<2 hex>/<62 hex>`).

Each store backend has its blob store (`checkpointing.store.Store.blobs`): `BlobStore` for files,
`store.pg_blobs.PostgresBlobStore` for PostgreSQL. Every backend reads back only bytes whose
SHA-256 is the reference (else `BlobCorruptError`), so a damaged copy is never returned.

A blob is written via temp file + fsync + rename (+ fsync of its folder) before any record that
references it, so a reference on disk always points at a complete blob. Reads verify the digest.
References in records look like `{"$blob": "sha256:<hex>", "size": N}`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from checkpointing.exceptions import BlobCorruptError, BlobMissingError
from checkpointing.fsyncs import atomic_write
from checkpointing.layout import blob_path, blobs_root

_REF_RE = re.compile(r"^sha256:([0-9a-f]{64})$")
_HEX2 = re.compile(r"^[0-9a-f]{2}$")
_HEX62 = re.compile(r"^[0-9a-f]{62}$")
BLOB_KEY = "$blob"


def blob_ref(data: bytes) -> str:
    """The reference of `data`: `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def ref_hex(ref: str) -> str:
    """The hex digest of reference `ref`, or `BlobMissingError` when `ref` is not `sha256:<64 hex>`."""
    m = _REF_RE.match(ref)
    if not m:
        raise BlobMissingError(f"invalid blob reference {ref!r}")
    return m.group(1)


def verified(ref: str, data: bytes, where: str) -> bytes:
    """`data` when it hashes to `ref`, else `BlobCorruptError` naming `where` it was read from."""
    if blob_ref(data) != ref:
        raise BlobCorruptError(f"blob {ref} at {where} does not match its digest")
    return data


class Blobs(Protocol):
    """A content-addressed blob store (one per store backend: `Store.blobs`)."""

    def put(self, data: bytes) -> str:
        """Store `data` (idempotent, safe when several processes put the same bytes at once) and
        return its reference `sha256:<hex>`."""
        ...

    def get(self, ref: str) -> bytes:
        """The bytes of blob `ref`, verified against its digest (`BlobCorruptError` when they do
        not match, `BlobMissingError` when there is no such blob)."""
        ...

    def exists(self, ref: str) -> bool:
        """Whether blob `ref` is stored (not verified)."""
        ...

    def delete(self, ref: str) -> int:
        """Remove blob `ref`; returns the bytes freed (0 when it was not there)."""
        ...

    def ref_obj(self, data: bytes) -> dict[str, Any]:
        """Store `data` and return the reference object records embed."""
        ...

    def refs(self) -> Iterator[str]:
        """Every stored blob's reference (for a reclaim: a blob put meanwhile may be missed)."""
        ...


class BlobStore:
    """Blobs under `base_dir/blobs/sha256/` (`layout.blob_path`); safe to share between sessions,
    processes and hosts."""

    def __init__(self, base_dir: Path | str) -> None:
        self.base_dir = Path(base_dir)
        self.root = blobs_root(base_dir)

    def path_for(self, ref: str) -> Path:
        """The file that holds blob `ref` (validated, so it cannot point outside the store)."""
        return blob_path(self.base_dir, ref_hex(ref))

    def put(self, data: bytes) -> str:
        """Store `data` (idempotent) and return its reference `sha256:<hex>`.

        A blob already there gets its modification time set to now: a reclaim that began before
        this put (`agent.session.blob_refs`) then keeps it, even if the record that will reference
        it is written after the reclaim scanned that session.
        """
        ref = blob_ref(data)
        path = self.path_for(ref)
        try:
            os.utime(path)
        except FileNotFoundError:
            atomic_write(path, data)
        except OSError:
            pass  # a read-only volume: the blob is there, its time only guards a reclaim
        return ref

    def delete(self, ref: str) -> int:
        """Remove blob `ref`; returns the bytes freed (0 when it was not there)."""
        path = self.path_for(ref)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        return size

    def get(self, ref: str) -> bytes:
        """Read blob `ref`, verifying its digest."""
        path = self.path_for(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError as err:
            raise BlobMissingError(
                f"blob {ref} is missing ({path}); the blob volume (base_dir/blobs) must be mounted"
            ) from err
        return verified(ref, data, str(path))

    def exists(self, ref: str) -> bool:
        """Whether blob `ref` is on disk (not verified)."""
        return self.path_for(ref).exists()

    def ref_obj(self, data: bytes) -> dict[str, Any]:
        """Store `data` and return the reference object records embed."""
        return {BLOB_KEY: self.put(data), "size": len(data)}

    def refs(self) -> Iterator[str]:
        """Every blob file's reference (temp files of puts in progress are not blobs)."""
        try:
            folders = sorted(e.name for e in os.scandir(self.root) if _HEX2.match(e.name))
        except FileNotFoundError:
            return
        for head in folders:
            try:
                names = sorted(e.name for e in os.scandir(self.root / head) if _HEX62.match(e.name))
            except FileNotFoundError:
                continue
            for name in names:
                yield f"sha256:{head}{name}"


def is_blob_ref(obj: Any) -> bool:
    """Whether `obj` is a blob reference object."""
    return isinstance(obj, dict) and set(obj) == {BLOB_KEY, "size"} and isinstance(obj.get(BLOB_KEY), str)
