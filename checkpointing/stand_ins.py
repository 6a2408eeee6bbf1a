"""Stand-ins for stored values whose class a reader does not allow: `StoredObject` (type name,
how it was stored, its fields) and `StoredFields` (those fields, read-only). Both are hashable
like the values they stand for, so a set member or a dict key reads back as a stand-in too.

`checkpointing.codec` makes them when decoding and writes them back as the values they stand for.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any


class StoredFields(Mapping[str, Any]):
    """The fields of a `StoredObject`, by name: a read-only mapping, equal to a dict of the same
    items, and hashable when its values are (containers among them are hashed by their content)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        self._items: dict[str, Any] = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(_hash_form(self))

    def __repr__(self) -> str:
        return f"StoredFields({self._items!r})"


@dataclasses.dataclass(frozen=True)
class StoredObject:
    """Stand-in for a stored value whose type is not on the allowlist: inspect, never executed.

    `type_name` is the class's `module:qualname`, `kind` how it was stored ("dataclass",
    "namedtuple", "model", "model_v1", "enum"), `fields` its fields by name (a `StoredFields`
    read-only mapping; for an enum, the member's value). Stand-ins are hashable, so a set, a
    frozenset or a dict key holding values of such a type reads back as stand-ins; a stand-in
    stored again is written as the value it stands for (a reader allowing the type rebuilds it).
    """

    type_name: str
    kind: str
    fields: Any

    def __post_init__(self) -> None:
        if isinstance(self.fields, dict):
            # frozen dataclass: the read-only form is set once, here
            object.__setattr__(self, "fields", StoredFields(self.fields))

    def __hash__(self) -> int:
        return hash((self.type_name, self.kind, _hash_form(self.fields)))


def _hash_form(v: Any) -> Any:
    """A hashable value equal for equal containers (dicts, lists, sets): the hash of a stand-in."""
    if isinstance(v, (dict, StoredFields)):
        return frozenset((k, _hash_form(x)) for k, x in v.items())
    if isinstance(v, (list, tuple, collections.deque)):
        return tuple(_hash_form(x) for x in v)
    if isinstance(v, (set, frozenset)):
        return frozenset(_hash_form(x) for x in v)
    return v
