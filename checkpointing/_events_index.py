"""The in-memory index of an event log (`checkpointing.events`): each entry's envelope (id,
parent, branch, type) and where its line is, the tree of parents and each branch's ends, and the
columns it is persisted as (`indexfile`'s state, kept beside the log by its store).
"""

from __future__ import annotations

import re
from typing import Any

PREVIOUS = 1
"""In the persisted index: this entry's parent is the entry before it (the common case)."""

# The envelope of an entry as the log writes it (orjson, keys in this order, ids without escapes):
# read without parsing the payload, so indexing a long log costs a checksum and a regex per line.
_ENVELOPE = re.compile(
    rb'\{"id":"([^"\\]+)","parent_id":(?:null|"([^"\\]+)"),"branch_id":"([^"\\]+)","type":"([^"\\]+)"'
)


class Rec:
    """One indexed entry: its envelope, where it is, and its verified JSON body once read (the
    payload is parsed on demand; an entry indexed from the persisted index has no body yet)."""

    __slots__ = ("body", "branch_id", "id", "line", "off", "parent_id", "type")

    def __init__(
        self, eid: str, parent_id: str | None, branch_id: str, type: str, body: bytes | None, off: int, line: int
    ) -> None:
        self.id = eid
        self.parent_id = parent_id
        self.branch_id = branch_id
        self.type = type
        self.body = body
        self.off = off
        self.line = line


def envelope_of(body: bytes, off: int, line: int) -> Rec | None:
    """The entry a verified body holds, read from its envelope alone (None: not in the log's own
    key order, the caller parses it)."""
    m = _ENVELOPE.match(body)
    if m is None:
        return None
    eid, parent, branch, etype = (g.decode() if g is not None else None for g in m.groups())
    assert eid is not None and branch is not None and etype is not None
    return Rec(eid, parent, branch, etype, body, off, line)


def envelope_id(body: bytes) -> str | None:
    """The id in a verified body's envelope (None: not in the log's own key order)."""
    m = _ENVELOPE.match(body)
    return m.group(1).decode() if m is not None else None


class EntryTree:
    """Every indexed entry by id, in append order, with children and branch ends."""

    def __init__(self) -> None:
        self.records: dict[str, Rec] = {}
        self.order: list[str] = []
        self.children: dict[str | None, list[str]] = {}
        self.branch_leaf: dict[str, str] = {}
        self.branch_first: dict[str, str] = {}
        self.branch_count: dict[str, int] = {}

    def add(self, rec: Rec) -> None:
        """Index `rec` as the newest entry."""
        self.records[rec.id] = rec
        self.order.append(rec.id)
        self.children.setdefault(rec.parent_id, []).append(rec.id)
        branch = rec.branch_id
        if branch not in self.branch_leaf:
            self.branch_first[branch] = rec.id
        self.branch_leaf[branch] = rec.id
        self.branch_count[branch] = self.branch_count.get(branch, 0) + 1

    def clear(self) -> None:
        """Forget every entry."""
        for d in (self.records, self.children, self.branch_leaf, self.branch_first, self.branch_count):
            d.clear()
        self.order.clear()

    def state(self, last: tuple[int, str]) -> dict[str, Any]:
        """The persisted form: columns of plain values (few objects to parse), a parent that is
        the entry before written as `PREVIOUS`; `last` is the last line's (offset, checksum)."""
        recs = [self.records[i] for i in self.order]
        prevs = [None, *self.order[:-1]]
        return {
            "ids": self.order,
            "parents": [PREVIOUS if r.parent_id == p and p else r.parent_id for r, p in zip(recs, prevs, strict=True)],
            "branches": [r.branch_id for r in recs],
            "types": [r.type for r in recs],
            "offs": [r.off for r in recs],
            "last": list(last),
        }


def from_state(st: Any) -> tuple[list[Rec], tuple[int, str]]:
    """The entries (without bodies; line 1 is the header) and the last line's (offset, checksum)
    of a persisted `state`; `KeyError`, `TypeError` or `ValueError` when it has another shape."""
    ids, offs = st["ids"], st["offs"]
    if len(ids) != len(offs):
        raise ValueError("columns of different lengths")
    recs: list[Rec] = []
    prev: str | None = None
    for i, (eid, parent, branch, etype, off) in enumerate(
        zip(ids, st["parents"], st["branches"], st["types"], offs, strict=True)
    ):
        pid = prev if parent == PREVIOUS else None if parent is None else str(parent)
        recs.append(Rec(str(eid), pid, str(branch), str(etype), None, int(off), i + 2))
        prev = str(eid)
    return recs, (int(st["last"][0]), str(st["last"][1]))
