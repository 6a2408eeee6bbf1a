"""The `celery` command in a process whose graph has one more node, so another GRAPH_VERSION: the
second worker version of a rolling upgrade drill.

    python -m tests.support.hooked_celery -A agent.worker worker -Q ...

The node is added before anything builds a runner (as a newer agentrt's graph would be), like the
graph case of tests/integration/crash/test_recovery_blocked.py.
"""

from __future__ import annotations

from typing import Any

import graph.build as gb

EXTRA_NODE = "audit"


def _with_extra_node(*args: Any, **kwargs: Any) -> Any:
    g = _BUILD(*args, **kwargs)
    g.add_node(EXTRA_NODE, lambda state: {})
    return g


_BUILD = gb.build_state_graph


def hooked_version() -> str:
    """The GRAPH_VERSION of the hooked graph (computed without changing this process's graph)."""
    return gb.compute_graph_version(_with_extra_node().compile())


def install() -> None:
    """Make this process build the hooked graph and report its version."""
    gb.build_state_graph = _with_extra_node
    gb.GRAPH_VERSION = hooked_version()


if __name__ == "__main__":
    install()
    from celery.__main__ import main

    main()
