"""The values of the tool execution journal (`agent.tools.journal`): a call's status (its state,
`JournalEntryState`, is the journal's), the anomalies doctor shows, the arguments' digest records
carry, and the in-memory index of one call: what `agentrt doctor` reads of the journal."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from checkpointing.records import canonical_json


class ResultTexts(Protocol):
    """Where long results are kept: the checkpoint log of the run (see `agent.tools.journal`)."""

    def put(self, run_id: str, text: str) -> dict[str, Any] | None:
        """Store `text`; its reference, or None when it is too short (kept inline)."""

    def get(self, run_id: str, ref: dict[str, Any]) -> str | None:
        """The text of `ref`, or None when it is not stored."""


class JournalStatus(StrEnum):
    """Where a tool call stands according to the journal."""

    NONE = "none"
    INTENT_ONLY = "intent_only"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(frozen=True)
class JournalAnomaly:
    """Something `agentrt doctor` should show: a call run twice, or one whose outcome is unknown."""

    run_id: str
    tool_call_id: str
    kind: Literal["completed_twice", "intent_without_end", "end_without_intent"]
    detail: str


def args_digest(args: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of tool arguments."""
    return "sha256:" + hashlib.sha256(canonical_json(args)).hexdigest()


@dataclass
class CallRecords:
    """The records of one (run_id, tool_call_id) read so far (the journal's in-memory index)."""

    intents: int = 0
    completed: int = 0
    failed: int = 0
    last_kind: str = ""
    intent: dict[str, Any] | None = None
    ends: list[dict[str, Any]] = field(default_factory=list)
    """Every COMPLETED / FAILED record of the call, in file order (the first readable one counts)."""

    @property
    def end(self) -> dict[str, Any] | None:
        """The first end record (what the model saw the first time)."""
        return self.ends[0] if self.ends else None


CallIndex = dict[tuple[str, str], CallRecords]
"""(run_id, tool_call_id) -> the call's records: the journal's in-memory index."""


def index_record(index: CallIndex, rec: dict[str, Any]) -> None:
    """Add one journal record to `index` (a kind from a newer writer is kept on disk, not interpreted)."""
    kind = rec.get("kind")
    if kind not in ("intent", "completed", "failed"):
        return
    key = index.setdefault((str(rec.get("run_id")), str(rec.get("tool_call_id"))), CallRecords())
    key.last_kind = str(kind)
    if kind == "intent":
        key.intents += 1
        key.intent = rec
        return
    if kind == "completed":
        key.completed += 1
    else:
        key.failed += 1
    key.ends.append(rec)


def anomalies(index: CallIndex) -> list[JournalAnomaly]:
    """Calls completed more than once, calls whose intent has no end, and ends with no intent."""
    out: list[JournalAnomaly] = []
    for (run_id, call_id), k in index.items():
        name = (k.intent or {}).get("tool_name")
        if k.completed > 1:
            detail = f"tool {name} has {k.completed} COMPLETED records: it ran more than once"
            out.append(JournalAnomaly(run_id, call_id, "completed_twice", detail))
        if k.last_kind == "intent":
            detail = f"tool {name} has an INTENT without an end: its outcome is unknown"
            out.append(JournalAnomaly(run_id, call_id, "intent_without_end", detail))
        if k.intents == 0:
            out.append(JournalAnomaly(run_id, call_id, "end_without_intent", "no INTENT record"))
    return out


RERUNNABLE = frozenset({"read_only", "idempotent"})
"""Effect classes a resume may run again when the journal has no record of the call."""
