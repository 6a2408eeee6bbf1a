"""Which branches of a session are live and what they are called, read from its event log alone.

A branch is deleted by a `branch_deleted` entry and named by `branch_renamed` entries (each names
the branch in its payload's `branch_id`); the deleted branch's own entries stay in the log as
history, but the branch leaves every listing. A branch can be named by its id or its name.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.core.errors import NotFound, quote_id
from checkpointing.entry_log import EventLog
from checkpointing.layout import MAIN_BRANCH

DELETED = "branch_deleted"
RENAMED = "branch_renamed"
BOOK_EVENTS = frozenset({DELETED, RENAMED})


@dataclass(frozen=True)
class BranchBook:
    """The live branches of one session (id -> newest entry) and their names (id -> name)."""

    live: dict[str, str]
    names: dict[str, str]
    deleted: frozenset[str]

    def name_of(self, branch_id: str) -> str | None:
        """The branch's name, or None."""
        return self.names.get(branch_id)

    def find(self, ref: str) -> str | None:
        """The id of the live branch `ref` names (its id or its name), or None."""
        if ref in self.live:
            return ref
        return next((b for b, name in self.names.items() if name == ref), None)

    def resolve(self, session_id: str, ref: str) -> str:
        """`find`, or `NotFound` naming the command that lists the branches."""
        found = self.find(ref)
        if found is None:
            sid = quote_id(session_id)
            raise NotFound(f"session {sid} has no branch {quote_id(ref)}; `agentrt branches {sid}` lists them")
        return found


def read_book(events: EventLog) -> BranchBook:
    """The book of `events` (only the `branch_deleted` / `branch_renamed` payloads are read)."""
    deleted: set[str] = set()
    names: dict[str, str] = {}
    for e in events.entries(BOOK_EVENTS) if events.exists() else []:
        branch = str((e.payload or {}).get("branch_id") or "")
        if e.type == DELETED:
            deleted.add(branch)
        elif e.payload.get("name"):
            names[branch] = str(e.payload["name"])
    live = {b: leaf for b, leaf in events.branches().items() if b not in deleted}
    return BranchBook(live, {b: n for b, n in names.items() if b in live}, frozenset(deleted - {MAIN_BRANCH}))


def live_branches(events: EventLog) -> dict[str, str]:
    """Every live branch id with its newest entry id (`EventLog.branches` less the deleted ones)."""
    return read_book(events).live
