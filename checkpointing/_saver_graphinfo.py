"""What a LangGraph checkpoint says about the graph: the node that ran and the nodes next."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.base import Checkpoint

BRANCH_PREFIX = "branch:to:"
JOIN_PREFIX = "join:"
START = "__start__"


def _gt(a: Any, b: Any) -> bool:
    try:
        return bool(a > b)
    except TypeError:
        return str(a) > str(b)


def _available(channel: str, value: Any) -> bool:
    """Whether a trigger channel holding checkpoint value `value` is available, as LangGraph's
    channels decide it: a `branch:to:` / `__start__` channel (EphemeralValue) when it holds a value,
    a deferred node's (LastValueAfterFinish, `(value, finished)`) once finished, a `join:a+b:node`
    barrier (NamedBarrierValue, the set of names seen; `(seen, finished)` when deferred) once every
    name was seen."""
    if channel.startswith(JOIN_PREFIX):
        names = set(channel[len(JOIN_PREFIX) : channel.rindex(":")].split("+"))
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], bool):
            return value[1] and set(value[0]) == names
        return isinstance(value, (set, frozenset, list)) and set(value) == names
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], bool):
        return value[1]
    return True


def _trigger_node(channel: str) -> str | None:
    """The node a StateGraph trigger channel starts (None for any other channel)."""
    if channel.startswith(BRANCH_PREFIX):
        return channel[len(BRANCH_PREFIX) :]
    if channel.startswith(JOIN_PREFIX) and channel.count(":") >= 2:
        return channel[channel.rindex(":") + 1 :]
    return START if channel == START else None


def next_nodes(checkpoint: Checkpoint) -> list[str]:
    """The nodes LangGraph runs next from this checkpoint, by its own trigger rule: a node runs
    when one of its trigger channels is available (holds a value: present in `channel_values`)
    and is newer than the version the node has seen; plus the targets of pending `Send` packets.

    Exact for StateGraph and functional-API graphs (their trigger channels are named `__start__`,
    `branch:to:<node>` and `join:<a+b>:<node>`); a hand-built Pregel graph's own trigger channels
    are not recognised (LangGraph's `get_state().next` is the answer there)."""
    cv = checkpoint["channel_versions"]
    vs = checkpoint["versions_seen"]
    values = checkpoint["channel_values"]
    out: set[str] = set()
    for ch, ver in cv.items():
        node = _trigger_node(ch)
        if node is None or ch not in values or not _available(ch, values[ch]):
            continue
        seen = vs.get(node, {}).get(ch)
        if seen is None or _gt(ver, seen):
            out.add(node)
    for packet in values.get("__pregel_tasks", []) or []:
        target = getattr(packet, "node", None)
        if isinstance(target, str):
            out.add(target)
    return sorted(out)


def current_node(versions_seen: Mapping[str, Any], parent_seen: Mapping[str, Any] | None) -> str | None:
    """The node(s) whose run produced this checkpoint: their versions_seen changed."""
    parent_seen = parent_seen or {}
    ran = sorted(n for n, v in versions_seen.items() if n != "__input__" and parent_seen.get(n) != v)
    return ",".join(ran) if ran else None
