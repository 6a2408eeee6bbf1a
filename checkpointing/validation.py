"""Checks of a loaded checkpoint document against what the caller expects.

The saver knows no caller concept: a caller pins what it cares about (a graph version, a digest of
its tools, ...) as checkpoint metadata, and asks the saver to check those keys on load
(`JsonlCheckpointSaver(expect_metadata=...)`) or passes its own `validate` hook.
`validate_metadata(doc, expected)` raises `DocumentMismatch(step, reason, expected, found)` at the
first key that differs, in the order given; an unknown `schema_version` raises `UnknownSchemaError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checkpointing._saver_format import READABLE_SCHEMA_VERSIONS
from checkpointing._saver_format import SCHEMA_VERSION as SCHEMA_VERSION
from checkpointing.exceptions import DocumentMismatch, UnknownSchemaError

KNOWN_SCHEMA_VERSIONS = READABLE_SCHEMA_VERSIONS


def check_schema_version(doc: Mapping[str, Any], where: str = "checkpoint") -> None:
    """Raise `UnknownSchemaError` unless the document's schema version is one this code reads."""
    found = doc.get("schema_version")
    if found not in KNOWN_SCHEMA_VERSIONS:
        raise UnknownSchemaError(
            f"{where} has schema_version {found!r}; this saver reads {sorted(KNOWN_SCHEMA_VERSIONS)}. "
            "Use the version that wrote it; the document was left untouched."
        )


def validate_metadata(doc: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Check the document's metadata against `expected`, key by key; raise at the first mismatch."""
    where = f"checkpoint {doc.get('checkpoint_id')}"
    check_schema_version(doc, where)
    meta = doc.get("metadata") or {}
    for key, want in expected.items():
        if meta.get(key) != want:
            raise DocumentMismatch(
                f"validate_{key}",
                f"{where}: {key} differs from the expected value; the checkpoint was not loaded, nothing was changed",
                want,
                meta.get(key),
            )
