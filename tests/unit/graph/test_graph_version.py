"""GRAPH_VERSION follows the compiled wiring."""

from __future__ import annotations

from graph.build import GRAPH_VERSION, build_graph, build_state_graph, compute_graph_version


def test_graph_version_is_stable_for_the_same_wiring() -> None:
    """Building the graph again gives the same version."""
    assert compute_graph_version(build_graph()) == GRAPH_VERSION


def test_rewiring_changes_the_graph_version() -> None:
    """Adding an edge or a node changes the version."""
    g = build_state_graph()
    g.add_node("extra", lambda state: {})
    g.add_edge("acting", "extra")
    assert compute_graph_version(g.compile()) != GRAPH_VERSION


def test_all_six_nodes_are_wired() -> None:
    """init, planning, reasoning, acting, refining and memory are all in the graph."""
    nodes = set(build_graph().get_graph().nodes)
    assert {"init", "planning", "reasoning", "acting", "refining", "memory"} <= nodes
