"""The bodies of the store routes (`agent.serve.routes_store`) as `langgraph_sdk`'s `client.store` sends
them, checked before the store is touched: a wrong type, an empty namespace, a label the store refuses
(empty, holding `.` or a NUL), a value the stores cannot keep, or a filter they cannot run is a 422
naming the field, never a 500 from a backend halfway through.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from agent.serve.bodies import INT64, MAX_LIMIT, Body
from agent.session.item_values import (
    MAX_TTL_MINUTES,
    MIN_TTL_MINUTES,
    RESERVED_ROOT,
    check_label,
    no_nul,
    storable_json,
)

__all__ = ["check_label", "storable_json"]

FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
"""The comparison operators both stores run (LangGraph's set)."""
_FILTER_KEY = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


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


def _key(value: str) -> str:
    return no_nul(value, "the key")


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
    """`PUT /store/items`: `ttl` in minutes (null: the item never expires); `index` names the fields
    embedded for the semantic index (`false`: none; null: `store.index.fields`), and without
    `store.index` in the settings it changes nothing."""

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
    """`POST /store/items/search`: with `store.index` in the settings a `query` ranks the items by
    similarity to it (most similar first, `score` set); without one, or without a `query`, the answer
    is the plain listing (newest update first, `score` null)."""

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
