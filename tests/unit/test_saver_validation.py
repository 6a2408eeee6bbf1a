"""Document validation: schema first, then the metadata pins the caller asked for, in order."""

from __future__ import annotations

from typing import Any

import pytest

from checkpointing.exceptions import DocumentMismatch, UnknownSchemaError
from checkpointing.validation import SCHEMA_VERSION, validate_metadata

DOC: dict[str, Any] = {
    "schema_version": SCHEMA_VERSION, "checkpoint_id": "c1",
    "metadata": {"graph_version": "g1", "surface_digest": "sha256:s", "toolset_hash": "sha256:h"},
}  # fmt: skip


def test_matching_document_passes_and_empty_expectations_check_only_schema() -> None:
    """A document equal to every expectation passes; nothing expected checks only the schema."""
    assert validate_metadata(DOC, {"graph_version": "g1", "toolset_hash": "sha256:h"}) is None
    assert validate_metadata({**DOC, "metadata": {}}, {}) is None  # no pins asked: none checked
    with pytest.raises(UnknownSchemaError):  # ... but the schema still is
        validate_metadata({**DOC, "schema_version": 1}, {})


@pytest.mark.parametrize("key", ["graph_version", "surface_digest", "toolset_hash", "absent"])
def test_each_mismatch_names_step_expected_and_found(key: str) -> None:
    """A differing key raises DocumentMismatch naming the step, expected and found values."""
    with pytest.raises(DocumentMismatch) as err:
        validate_metadata(DOC, {key: "other"})
    assert err.value.step == f"validate_{key}" and err.value.expected == "other"
    assert err.value.found == DOC["metadata"].get(key)


def test_unknown_schema_version_is_its_own_error() -> None:
    """An unknown schema_version raises UnknownSchemaError before any other check."""
    with pytest.raises(UnknownSchemaError, match="schema_version 1"):
        validate_metadata({**DOC, "schema_version": 1}, {"graph_version": "other"})
