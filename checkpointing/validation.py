"""Checks of a loaded checkpoint document against what the caller expects (seed §5 recovery).

`validate_document(doc, expectations)` runs the checks in recovery order (schema, tenant, agent,
branch, graph version, surface digest, toolset hash) and raises `DocumentMismatch(step, reason,
expected, found)` at the first one that fails; an unknown `schema_version` raises
`UnknownSchemaError`. An expectation left at None is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkpointing.errors import DocumentMismatch, UnknownSchemaError

SCHEMA_VERSION = 2
KNOWN_SCHEMA_VERSIONS = frozenset({SCHEMA_VERSION})


@dataclass(frozen=True)
class DocumentExpectations:
    """What a checkpoint document must match to be restored; None means "do not check"."""

    tenant_id: str | None = None
    agent_id: str | None = None
    branch_id: str | None = None
    graph_version: str | None = None
    surface_digest: str | None = None
    toolset_hash: str | None = None

    def is_empty(self) -> bool:
        """Whether nothing is checked beyond the schema version."""
        return all(v is None for v in vars(self).values())


def check_schema_version(doc: dict[str, Any], where: str = "checkpoint") -> None:
    """Raise `UnknownSchemaError` unless the document's schema version is one this code reads."""
    found = doc.get("schema_version")
    if found not in KNOWN_SCHEMA_VERSIONS:
        raise UnknownSchemaError(
            f"{where} has schema_version {found!r}; this agentrt reads {sorted(KNOWN_SCHEMA_VERSIONS)}. "
            "Upgrade agentrt (or restore with the version that wrote it); the document was left untouched."
        )


def validate_document(doc: dict[str, Any], expected: DocumentExpectations) -> None:
    """Check `doc` against `expected`, in recovery order; raise at the first mismatch."""
    where = f"checkpoint {doc.get('checkpoint_id')}"
    check_schema_version(doc, where)
    snapshot = doc.get("runtime_snapshot") or {}
    checks: list[tuple[str, str, Any, Any]] = [
        ("validate_tenant", "tenant differs", expected.tenant_id, doc.get("tenant_id")),
        ("validate_agent", "agent differs", expected.agent_id, doc.get("agent_id")),
        ("validate_branch", "branch differs", expected.branch_id, doc.get("branch_id")),
        ("validate_graph", "graph version changed", expected.graph_version, doc.get("graph_version")),
        (
            "validate_surface",
            "runtime surface digest changed",
            expected.surface_digest,
            snapshot.get("surface_digest"),
        ),
        ("validate_toolset", "toolset hash changed", expected.toolset_hash, snapshot.get("toolset_hash")),
    ]
    for step, reason, want, found in checks:
        if want is not None and want != found:
            raise DocumentMismatch(step, f"{where}: {reason}; recovery is blocked, state was kept", want, found)
