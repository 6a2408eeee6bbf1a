"""build_graph(): the StateGraph wiring of DESIGN §3, its routing, and GRAPH_VERSION.

    START -> init -> planning -> reasoning -> {acting | memory | refining}
    acting -> refining
    refining -> {memory | planning (replan) | END}
    memory -> {reasoning | refining (compression exhausted)}

GRAPH_VERSION is a digest of the compiled structure (node names and every edge, conditional
targets included) plus the state SCHEMA_VERSION: changing the wiring changes it, so recovery
can refuse to continue an old checkpoint on a different graph.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.state import SCHEMA_VERSION, GraphInput, TaskExecutionState
from nodes.acting import acting_node
from nodes.init import init_node
from nodes.memory import memory_node, route_after_memory
from nodes.planning import planning_node
from nodes.reasoning import reasoning_node, route_after_reasoning
from nodes.refining import refining_node, route_after_refining

NODE_NAMES = ("init", "planning", "reasoning", "acting", "refining", "memory")


def build_state_graph() -> StateGraph:
    """The uncompiled StateGraph."""
    g = StateGraph(TaskExecutionState, input_schema=GraphInput)
    g.add_node("init", init_node)
    g.add_node("planning", planning_node)
    g.add_node("reasoning", reasoning_node)
    g.add_node("acting", acting_node)
    g.add_node("refining", refining_node)
    g.add_node("memory", memory_node)
    g.add_edge(START, "init")
    g.add_edge("init", "planning")
    g.add_edge("planning", "reasoning")
    g.add_conditional_edges(
        "reasoning", route_after_reasoning, {"acting": "acting", "memory": "memory", "refining": "refining"}
    )
    g.add_edge("acting", "refining")
    g.add_conditional_edges(
        "refining", route_after_refining, {"memory": "memory", "planning": "planning", "__end__": END}
    )
    g.add_conditional_edges("memory", route_after_memory, {"reasoning": "reasoning", "refining": "refining"})
    return g


def graph_structure(compiled: CompiledStateGraph) -> dict[str, Any]:
    """Nodes and edges of a compiled graph as plain sorted data."""
    drawable = compiled.get_graph()
    nodes = sorted(drawable.nodes)
    edges = sorted(
        [e.source, e.target, bool(e.conditional), str(e.data) if e.data is not None else None] for e in drawable.edges
    )
    return {"nodes": nodes, "edges": edges, "schema_version": SCHEMA_VERSION}


def compute_graph_version(compiled: CompiledStateGraph) -> str:
    """A short stable digest of the graph's structure."""
    blob = json.dumps(graph_structure(compiled), sort_keys=True, separators=(",", ":"))
    return "g1-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """Compile the agent graph (with `checkpointer`, or none for `langgraph dev`)."""
    return build_state_graph().compile(checkpointer=checkpointer, name="agentrt")


GRAPH_VERSION = compute_graph_version(build_graph())
