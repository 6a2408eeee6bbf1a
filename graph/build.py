"""build_graph(): the StateGraph wiring of DESIGN §3, its routing, and GRAPH_VERSION.

    START -> init -> planning -> reasoning -> {acting | memory | refining}
    acting -> {reasoning (the step continues) | refining (replan or finish)}
    refining -> {reasoning | planning (replan) | END}
    memory -> {reasoning | refining (compression exhausted)}

A tool step is two supersteps, reasoning and acting, as in a bare ReAct loop: acting records the
loop's guards itself when the step continues (nodes.acting), and reasoning sends the state to
memory first whenever compression is due, so memory runs only when it has work.

The graph's `context_schema` is `graph.context.AgentContext`: callers pass one per run
(`context=AgentContext(factory)`), and nodes read it from LangGraph's injected `Runtime`. A caller
that cannot pass a context (`langgraph dev`) compiles the graph with `default_context`, which
supplies one whenever a run arrives without it.

GRAPH_VERSION is a digest of the compiled structure (node names and every edge, conditional
targets included) plus the state SCHEMA_VERSION: changing the wiring changes it, so recovery
can refuse to continue an old checkpoint on a different graph.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graph.context import AgentContext
from graph.state import SCHEMA_VERSION, GraphInput, TaskExecutionState
from nodes.acting import acting_node, route_after_acting
from nodes.init import init_node
from nodes.memory import memory_node, route_after_memory
from nodes.planning import planning_node
from nodes.reasoning import reasoning_node, route_after_reasoning
from nodes.refining import refining_node, route_after_refining

NODE_NAMES = ("init", "planning", "reasoning", "acting", "refining", "memory")
NODES: dict[str, Any] = {
    "init": init_node,
    "planning": planning_node,
    "reasoning": reasoning_node,
    "acting": acting_node,
    "refining": refining_node,
    "memory": memory_node,
}
DefaultContext = Callable[[RunnableConfig], AgentContext]
"""Supplies the context of a run started without one (config -> AgentContext)."""

Node = Callable[[TaskExecutionState, RunnableConfig, Runtime[AgentContext]], dict[str, Any]]


def _with_default_context(node: Node, default: DefaultContext) -> Any:
    def run(state: TaskExecutionState, config: RunnableConfig, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        ctx = runtime.context
        if not isinstance(ctx, AgentContext) or ctx.factory is None:  # none given, or an empty `{}`
            runtime = runtime.override(context=default(config))
        return node(state, config, runtime)

    run.__name__ = run.__qualname__ = getattr(node, "__name__", "node")
    run.__doc__ = node.__doc__
    return run


AgentGraph = StateGraph[TaskExecutionState, AgentContext, GraphInput, TaskExecutionState]


def build_state_graph(default_context: DefaultContext | None = None) -> AgentGraph:
    """The uncompiled StateGraph (nodes fall back to `default_context` when a run has no context)."""
    g: AgentGraph = StateGraph(TaskExecutionState, context_schema=AgentContext, input_schema=GraphInput)
    for name in NODE_NAMES:
        node = NODES[name]
        g.add_node(name, _with_default_context(node, default_context) if default_context else node)
    g.add_edge(START, "init")
    g.add_edge("init", "planning")
    g.add_edge("planning", "reasoning")
    g.add_conditional_edges(
        "reasoning", route_after_reasoning, {"acting": "acting", "memory": "memory", "refining": "refining"}
    )
    g.add_conditional_edges("acting", route_after_acting, {"reasoning": "reasoning", "refining": "refining"})
    g.add_conditional_edges(
        "refining", route_after_refining, {"reasoning": "reasoning", "planning": "planning", "__end__": END}
    )
    g.add_conditional_edges("memory", route_after_memory, {"reasoning": "reasoning", "refining": "refining"})
    return g


def graph_structure(compiled: CompiledStateGraph[Any, Any, Any, Any]) -> dict[str, Any]:
    """Nodes and edges of a compiled graph as plain sorted data."""
    drawable = compiled.get_graph()
    nodes = sorted(drawable.nodes)
    edges = sorted(
        [e.source, e.target, bool(e.conditional), str(e.data) if e.data is not None else None] for e in drawable.edges
    )
    return {"nodes": nodes, "edges": edges, "schema_version": SCHEMA_VERSION}


def compute_graph_version(compiled: CompiledStateGraph[Any, Any, Any, Any]) -> str:
    """A short stable digest of the graph's structure."""
    blob = json.dumps(graph_structure(compiled), sort_keys=True, separators=(",", ":"))
    return "g1-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None, *, default_context: DefaultContext | None = None
) -> CompiledStateGraph[TaskExecutionState, AgentContext, GraphInput, TaskExecutionState]:
    """Compile the agent graph (with `checkpointer`, or none for `langgraph dev`).

    A checkpointer with `allow_graph` (the JSONL saver) is told the graph's classes, so the values
    of a fresh process read back as themselves: LangGraph passes them only in strict msgpack mode.
    """
    compiled = build_state_graph(default_context).compile(checkpointer=checkpointer, name="agentrt")
    allow_graph = getattr(checkpointer, "allow_graph", None)
    if callable(allow_graph):
        allow_graph(compiled)
    return compiled


GRAPH_VERSION = compute_graph_version(build_graph())
