"""What LangGraph's stores can keep as an item (`agent.session.item_store`), checked before a store
is touched: by the store API's bodies (`agent.serve.store_bodies`) and by `agentrt items import`.
"""

from __future__ import annotations

import math
from typing import Any

MIN_TTL_MINUTES = 0.001
"""The shortest `ttl` (60 ms, in minutes): the PostgreSQL store cannot read a shorter one's interval."""
MAX_TTL_MINUTES = 100 * 365 * 24 * 60
"""The longest `ttl` (a hundred years, in minutes): beyond it an expiry date no longer fits the stores."""
MAX_NESTING = 100
"""How deep a stored value may nest (the SQLite store's JSON encoder stops at 255 levels)."""
RESERVED_ROOT = "langgraph"
"""The first label LangGraph keeps for itself (its `BaseStore.put` refuses it)."""
_INT64 = (-(2**63), 2**63 - 1)


def check_label(label: str) -> str:
    """A namespace label the stores accept: non-empty, without `.` (their separator) or a NUL."""
    if not label:
        raise ValueError("a namespace label cannot be empty")
    if "." in label:
        raise ValueError(f"namespace label {label!r} contains a period ('.'), which separates labels")
    if "\x00" in label:
        raise ValueError(f"namespace label {label!r} contains a NUL character")
    return label


def no_nul(text: str, what: str) -> str:
    """`text`, refused when it holds a NUL (neither store keeps one)."""
    if "\x00" in text:
        raise ValueError(f"{what} contains a NUL character, which the stores cannot keep")
    return text


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
                no_nul(str(k), f"key {str(k)[:40]!r}")
                stack.append((v, depth + 1))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            no_nul(item, f"string {item[:40]!r}")
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int) and not _INT64[0] <= item <= _INT64[1]:
            raise ValueError(f"integer {item} does not fit in 64 bits")
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"number {item} is not finite (JSON has no NaN or Infinity)")
    return value
