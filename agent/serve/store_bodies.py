"""The bodies of the store routes (`agent.serve.routes_store`) as `langgraph_sdk`'s `client.store` sends
them, checked before the store is touched: a wrong type, an empty namespace, a label the store refuses
(empty, holding `.` or a NUL), a value the stores cannot keep, or a filter they cannot run is a 422
naming the field, never a 500 from a backend halfway through.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from agent.serve.bodies import INT64, MAX_LIMIT, Body

MIN_TTL_MINUTES = 0.001
"""The shortest `ttl` (60 ms, in minutes): the PostgreSQL store cannot read a shorter one's interval."""
MAX_TTL_MINUTES = 100 * 365 * 24 * 60
"""The longest `ttl` (a hundred years, in minutes): beyond it an expiry date no longer fits the stores."""
MAX_NESTING = 100
"""How deep a stored value may nest (the SQLite store's JSON encoder stops at 255 levels)."""
FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
"""The comparison operators both stores run (LangGraph's set)."""
_FILTER_KEY = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
RESERVED_ROOT = "langgraph"
"""The first label LangGraph keeps for itself (its `BaseStore.put` refuses it)."""


def check_label(label: str) -> str:
    """A namespace label the stores accept: non-empty, without `.` (their separator) or a NUL."""
    if not label:
        raise ValueError("a namespace label cannot be empty")
    if "." in label:
        raise ValueError(f"namespace label {label!r} contains a period ('.'), which separates labels")
    if "\x00" in label:
        raise ValueError(f"namespace label {label!r} contains a NUL character")
    return label


def _labels(value: list[str]) -> list[str]:
    for label in value:
        check_label(label)
    return value


def _namespace(value: list[str]) -> list[str]:
    if not value:
        raise ValueError("the namespace cannot be empty: give at least one label")
    return _labels(value)


def _writable(value: list[str]) -> list[str]:
    if value and value[0] == RESERVED_ROOT:
        raise ValueError(f"the first label cannot be {RESERVED_ROOT!r}: LangGraph reserves it")
    return value


def _no_nul(text: str, what: str) -> str:
    if "\x00" in text:
        raise ValueError(f"{what} contains a NUL character, which the stores cannot keep")
    return text


def _key(value: str) -> str:
    return _no_nul(value, "the key")


def storable_json(value: Any) -> Any:
    """JSON both stores keep as given: integers within 64 bits, finite numbers, no NUL in a string
    or a key, at most `MAX_NESTING` levels deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ValueError(f"the value nests deeper than {MAX_NESTING} levels")
        if isinstance(item, dict):
            for k, v in item.items():
                _no_nul(str(k), f"key {str(k)[:40]!r}")
                stack.append((v, depth + 1))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            _no_nul(item, f"string {item[:40]!r}")
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int) and not INT64[0] <= item <= INT64[1]:
            raise ValueError(f"integer {item} does not fit in 64 bits")
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"number {item} is not finite (JSON has no NaN or Infinity)")
    return value


def _filter(value: dict[str, Any]) -> dict[str, Any]:
    for key, cond in value.items():
        if not _FILTER_KEY.match(key):
            raise ValueError(
                f"filter key {key[:40]!r}: a top-level field name of letters, digits, '_' and '-' (1 to 256)"
            )
        if isinstance(cond, dict):
            unknown = sorted(set(cond) - FILTER_OPERATORS)
            if unknown:
                known = ", ".join(sorted(FILTER_OPERATORS))
                raise ValueError(f"filter on {key!r}: unknown operator {unknown[0][:40]!r}; use {known}")
    return storable_json(value)


Namespace = Annotated[list[str], AfterValidator(_namespace)]
"""A namespace naming items: at least one label, each one the stores accept."""
Labels = Annotated[list[str], AfterValidator(_labels)]
"""Labels of a prefix or a suffix (may be empty: no condition)."""
Key = Annotated[str, Field(min_length=1), AfterValidator(_key)]
Value = Annotated[dict[str, Any], AfterValidator(storable_json)]
Filter = Annotated[dict[str, Any], AfterValidator(_filter)]
Offset = Annotated[int, Field(ge=0, le=INT64[1])]


class StorePut(Body):
    """`PUT /store/items`: `ttl` in minutes (null: the item never expires); `index` is accepted and
    changes nothing (no semantic index is configured)."""

    namespace: Annotated[Namespace, AfterValidator(_writable)]
    key: Key
    value: Value
    index: Literal[False] | list[str] | None = None
    ttl: float | None = Field(default=None, ge=MIN_TTL_MINUTES, le=MAX_TTL_MINUTES, allow_inf_nan=False)


class StoreDelete(Body):
    """`DELETE /store/items`."""

    namespace: Namespace
    key: Key


class StoreSearch(Body):
    """`POST /store/items/search`: `query` is accepted and, with no semantic index, the answer is the
    plain listing (newest update first, `score` null)."""

    namespace_prefix: Labels | None = None
    filter: Filter | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    offset: Offset = 0
    query: str | None = None
    refresh_ttl: bool | None = None


class StoreNamespaces(Body):
    """`POST /store/namespaces`."""

    prefix: Labels | None = None
    suffix: Labels | None = None
    max_depth: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=MAX_LIMIT)
    offset: Offset = 0
