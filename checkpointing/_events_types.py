"""What an event log (`checkpointing.entry_log`) holds: the schema its owner gives it, and its entries.

Re-exported by `checkpointing.entry_log`, where callers import them from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import uuid6

SCHEMA_VERSION = 2
IDENTITY = ("tenant_id", "session_id")
"""Header fields every log writes: the log checks them against its session."""


@dataclass(frozen=True)
class EventSchema:
    """What an owner keeps in its event log: the entry types it allows and its header fields.

    `types`: the entry types `append` accepts (any other raises `ValueError` naming them); None
    accepts any non-empty type. `header_fields`: the fields of the header line after `kind` and
    `schema_version`, in this order (`create` takes these from its argument, absent ones as
    null, and fills `created_at`, when listed, with the current time); it must list tenant_id and
    session_id. Reads never depend on the schema: a log written under another one opens as is.
    """

    types: frozenset[str] | None = None
    header_fields: tuple[str, ...] = ("tenant_id", "session_id", "created_at")

    def __post_init__(self) -> None:
        if self.types is not None:
            object.__setattr__(self, "types", frozenset(self.types))
        object.__setattr__(self, "header_fields", tuple(self.header_fields))
        missing = [f for f in IDENTITY if f not in self.header_fields]
        if missing or len(set(self.header_fields)) != len(self.header_fields):
            raise ValueError(
                f"header_fields {list(self.header_fields)} must name each field once and include {list(IDENTITY)}"
            )
        if {"kind", "schema_version"} & set(self.header_fields):
            raise ValueError("header_fields may not use the reserved names 'kind' and 'schema_version'")

    def check_type(self, type: str) -> None:
        """Raise `ValueError` unless entries of `type` may be appended."""
        if self.types is None:
            if not isinstance(type, str) or not type:
                raise ValueError(f"an event type must be a non-empty string, got {type!r}")
            return
        if type not in self.types:
            raise ValueError(f"unknown event type {type!r}; use one of {sorted(self.types)}")


ANY_EVENTS = EventSchema()
"""The default schema: any entry type; a header of tenant_id, session_id and created_at."""


def new_entry_id() -> str:
    """A new sortable entry id (UUIDv7)."""
    return str(uuid6.uuid7())


@dataclass(frozen=True)
class Entry:
    """One event of the tree, payload resolved (blob references replaced by their content)."""

    id: str
    parent_id: str | None
    branch_id: str
    type: str
    ts: str
    """ISO 8601 UTC time of the append."""
    payload: dict[str, Any]
    fence: int | None = None
    """Lease fencing token of the writer, when it held one."""
