"""The LangGraph Studio / `langgraph dev` entry that `langgraph.json` points at.

`langgraph dev` refuses a graph compiled with its own checkpointer, so `make_graph` compiles the
agent graph without one and the server is given our JSONL saver through `langgraph.json`
(`"checkpointer": {"path": "./graph/studio.py:checkpointer"}`). The server passes no LangGraph
context, so `make_graph` compiles the graph with a `default_context`: a run that arrives without
one gets an `AgentContext` over this graph's own LoopRuntime factory
(`agent.loop.builder.RuntimeBuilder`, built from the settings), so a run started through the
server's API executes the same six nodes, tools and journal as `agentrt run`; a caller may still
pass its own context. Nothing is registered process-wide.

Settings come from the file named by `AGENTRT_CONFIG` (default: configs/default.yaml), with the
usual `AGENTRT_*` overrides (e.g. `AGENTRT_BASE_DIR`).

The server loads this module in a worker thread but calls factories on its event loop, where any
blocking file access fails; so the graph and the saver are built once here, at import time,
and exported as plain objects (`agent_graph`, `checkpointer`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from agent.config import AgentSettings, load_settings
from checkpointing.saver import JsonlCheckpointSaver
from graph.build import GRAPH_VERSION, build_graph
from graph.context import AgentContext, RuntimeFactory
from graph.state import SCHEMA_VERSION

CONFIG_ENV = "AGENTRT_CONFIG"


def studio_settings() -> AgentSettings:
    """The settings the Studio server runs under (`AGENTRT_CONFIG`, else configs/default.yaml)."""
    return load_settings(os.environ.get(CONFIG_ENV) or None)


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


def make_graph(settings: AgentSettings | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent graph without a checkpointer; runs without a context get one over the settings' factory."""
    # Imported here: the graph package must stay importable without the agent layer.
    from agent.loop.builder import RuntimeBuilder
    from agent.loop.surface import compute_pins, skills_digest
    from agent.tools.registry import build_toolset, toolset_descriptor
    from checkpointing.blobs import BlobStore

    settings = settings or studio_settings()
    tools = build_toolset(settings.tools)
    builder = RuntimeBuilder(settings, tools, BlobStore(settings.base_dir))
    contexts = RunContexts(builder)
    pins = compute_pins(settings, toolset_descriptor(tools), GRAPH_VERSION, skill=skills_digest(builder.skills))
    # Scalars in `configurable` land in checkpoint metadata, as they do for `agentrt run`.
    conf = {"tenant_id": settings.session.tenant_id, "state_schema_version": SCHEMA_VERSION, **pins.as_config()}
    return build_graph(checkpointer=None, default_context=contexts).with_config(
        configurable=conf, recursion_limit=max(60, settings.loop.max_iterations * 8)
    )


def make_checkpointer(settings: AgentSettings | None = None) -> JsonlCheckpointSaver:
    """Our JSONL saver on the settings' `base_dir` (whatever `persistence.saver` says)."""
    from agent.services import jsonl_saver

    return jsonl_saver(settings or studio_settings())


_settings = studio_settings()
agent_graph = make_graph(_settings)
checkpointer = make_checkpointer(_settings)
