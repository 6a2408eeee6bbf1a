"""What LangGraph Studio / `langgraph dev` serves: the agent graph and our saver, from the settings.

`langgraph dev` refuses a graph compiled with its own checkpointer, so `studio_parts` compiles the
agent graph without one and returns our JSONL saver beside it (`langgraph.json` names both, through
`graph/studio.py`). The server passes no LangGraph context, so the graph is compiled with a
`default_context`: a run that arrives without one gets an `AgentContext` over the same LoopRuntime
factory `agentrt run` uses (`RuntimeBuilder`, built from the settings), so a run started through the
server's API executes the same six nodes, tools and journal; a caller may still pass its own
context. Nothing is registered process-wide.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from agent.core.config import AgentSettings, load_settings
from agent.loop.surface import compute_pins, skills_digest
from agent.runner.builder import RuntimeBuilder
from agent.runner.services import jsonl_saver
from agent.tools.registry import build_toolset, toolset_descriptor
from checkpointing.blobs import BlobStore
from checkpointing.saver import JsonlCheckpointSaver
from graph.build import GRAPH_VERSION, build_graph
from graph.context import AgentContext, RuntimeFactory
from graph.state import SCHEMA_VERSION


class StudioParts(NamedTuple):
    """The two objects `langgraph.json` points at."""

    graph: CompiledStateGraph[Any, Any, Any, Any]
    """The agent graph, without a checkpointer; runs without a context get one (`RunContexts`)."""
    checkpointer: JsonlCheckpointSaver
    """Our JSONL saver on the settings' `base_dir` (whatever `persistence.saver` says)."""


class RunContexts:
    """The default context of runs that come without one: one AgentContext per run, kept while it runs.

    Keyed by (tenant, thread, run id) so the nodes of one run share its LoopRuntime; bounded, since
    the server never says when a run ended (a dropped context is rebuilt by the next node).
    """

    KEEP = 64

    def __init__(self, factory: RuntimeFactory) -> None:
        self.factory = factory
        self._by_run: OrderedDict[tuple[str, str, str], AgentContext] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, config: RunnableConfig) -> AgentContext:
        conf = config.get("configurable") or {}
        key = (str(conf.get("tenant_id") or ""), str(conf.get("thread_id") or ""), str(conf.get("run_id") or ""))
        with self._lock:
            ctx = self._by_run.get(key)
            if ctx is None:
                ctx = self._by_run[key] = AgentContext(self.factory)
                while len(self._by_run) > self.KEEP:
                    self._by_run.popitem(last=False)
            return ctx


def studio_graph(settings: AgentSettings) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent graph without a checkpointer; runs without a context get one over the settings' factory."""
    tools = build_toolset(settings.tools)
    builder = RuntimeBuilder(settings, tools, BlobStore(settings.base_dir))
    pins = compute_pins(settings, toolset_descriptor(tools), GRAPH_VERSION, skill=skills_digest(builder.skills))
    # Scalars in `configurable` land in checkpoint metadata, as they do for `agentrt run`.
    conf = {"tenant_id": settings.session.tenant_id, "state_schema_version": SCHEMA_VERSION, **pins.as_config()}
    return build_graph(checkpointer=None, default_context=RunContexts(builder)).with_config(
        configurable=conf, recursion_limit=max(60, settings.loop.max_iterations * 8)
    )


def studio_parts(config_path: str | Path | None = None) -> StudioParts:
    """The graph and the saver Studio serves, under the settings of `config_path` (None: the defaults,
    configs/default.yaml), with the usual `AGENTRT_*` overrides."""
    settings = load_settings(config_path)
    return StudioParts(studio_graph(settings), jsonl_saver(settings))
