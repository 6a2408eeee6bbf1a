"""No import cycle between agent's packages, not even one made only by type hints.

The layers contract (tests/unit/test_layers.py) lets the parts of one floor import each other and
lists known exceptions; this check has neither: a package that imports another (directly, under
`TYPE_CHECKING`, or through any chain of modules) must not be imported back by it.
"""

from __future__ import annotations

import grimp

PACKAGES = (
    "agent.core",
    "agent.session",
    "agent.loop",
    "agent.tools",
    "agent.runner",
    "agent.doctor",
    "agent.transfer",
    "agent.cli",
    "agent.serve",
)


def _build() -> grimp.ImportGraph:
    # No cache: grimp's cache would answer for another checkout's files of the same names.
    return grimp.build_graph(
        "agent", "graph", "nodes", "checkpointing", include_external_packages=False, cache_dir=None
    )


def _cycles(graph: grimp.ImportGraph, full: grimp.ImportGraph) -> list[str]:
    """Each import of one package by another that a chain of imports leads back from, shown with
    some of its module imports and the chain back. `graph` has each of `PACKAGES` squashed into
    one node; `full` is the same graph unsquashed."""
    found = []
    for a in PACKAGES:
        for b in PACKAGES:
            if a == b or not graph.direct_import_exists(importer=a, imported=b):
                continue
            back = graph.find_shortest_chain(importer=b, imported=a)
            if back is None:
                continue
            imports = full.find_matching_direct_imports(import_expression=f"{a}.** -> {b}.**")
            here = sorted(f"{i['importer']} -> {i['imported']}" for i in imports)
            found.append(f"{a} -> {b} ({', '.join(here[:3])}) and back: {' -> '.join(back)}")
    return found


def test_no_import_cycle_between_agent_packages() -> None:
    """No package of agent reaches itself through another: the floors read one way, type hints
    included."""
    full = _build()
    graph = _build()
    for package in PACKAGES:
        graph.squash_module(package)
    assert graph.direct_import_exists(importer="agent.runner", imported="agent.session"), (
        "the graph misses the runner's imports: the check would see nothing"
    )
    cycles = _cycles(graph, full)
    assert cycles == [], "import cycles between agent's packages:\n" + "\n".join(cycles)
