"""What a LangGraph checkpoint says about the graph: the node that ran and the nodes next."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.base import Checkpoint

BRANCH_PREFIX = "branch:to:"


def _gt(a: Any, b: Any) -> bool:
    try:
        return bool(a > b)
    except TypeError:
        return str(a) > str(b)


def next_nodes(checkpoint: Checkpoint) -> list[str]:
    """Nodes LangGraph will run next: a trigger channel newer than what the node has seen."""
    cv = checkpoint["channel_versions"]
    vs = checkpoint["versions_seen"]
    out: set[str] = set()
    for ch, ver in cv.items():
        if ch.startswith(BRANCH_PREFIX):
            node = ch[len(BRANCH_PREFIX) :]
        elif ch == "__start__":
            node = ch
        else:
            continue
        seen = vs.get(node, {}).get(ch)
        if seen is None or _gt(ver, seen):
            out.add(node)
    for packet in checkpoint["channel_values"].get("__pregel_tasks", []) or []:
        target = getattr(packet, "node", None)
        if isinstance(target, str):
            out.add(target)
    return sorted(out)


def current_node(versions_seen: Mapping[str, Any], parent_seen: Mapping[str, Any] | None) -> str | None:
    """The node(s) whose run produced this checkpoint: their versions_seen changed."""
    parent_seen = parent_seen or {}
    ran = sorted(n for n, v in versions_seen.items() if n != "__input__" and parent_seen.get(n) != v)
    return ",".join(ran) if ran else None
