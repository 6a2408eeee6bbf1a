"""Document validation for recovery: schema first, then identity, graph, surface and toolset."""

from __future__ import annotations

from typing import Any

import pytest

from checkpointing.errors import DocumentMismatch, UnknownSchemaError
from checkpointing.validation import DocumentExpectations, validate_document

DOC: dict[str, Any] = {
    "schema_version": 1, "checkpoint_id": "c1", "tenant_id": "t", "agent_id": "a", "branch_id": "b",
    "graph_version": "g1", "runtime_snapshot": {"surface_digest": "sha256:s", "toolset_hash": "sha256:h"},
}  # fmt: skip


def test_matching_document_passes_and_empty_expectations_check_only_schema() -> None:
    """A document equal to every expectation passes; None expectations are not checked."""
    validate_document(DOC, DocumentExpectations("t", "a", "b", "g1", "sha256:s", "sha256:h"))
    validate_document(DOC, DocumentExpectations())


@pytest.mark.parametrize(
    ("field", "step"),
    [("tenant_id", "validate_tenant"), ("agent_id", "validate_agent"), ("branch_id", "validate_branch"),
     ("graph_version", "validate_graph"), ("surface_digest", "validate_surface"),
     ("toolset_hash", "validate_toolset")],
)  # fmt: skip
def test_each_mismatch_names_step_expected_and_found(field: str, step: str) -> None:
    """A differing field raises DocumentMismatch with the recovery step, expected and found values."""
    exp = DocumentExpectations(**{field: "other"})
    with pytest.raises(DocumentMismatch) as err:
        validate_document(DOC, exp)
    assert err.value.step == step and err.value.expected == "other"
    assert err.value.found == (DOC.get(field) or DOC["runtime_snapshot"][field])


def test_unknown_schema_version_is_its_own_error() -> None:
    """schema_version 2 (unknown) raises UnknownSchemaError before any other check."""
    with pytest.raises(UnknownSchemaError, match="schema_version 2"):
        validate_document({**DOC, "schema_version": 2}, DocumentExpectations(graph_version="other"))
