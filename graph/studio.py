"""The LangGraph Studio / `langgraph dev` entry that `langgraph.json` points at.

Settings come from the file named by `AGENTRT_CONFIG` (default: configs/default.yaml), with the
usual `AGENTRT_*` overrides (e.g. `AGENTRT_BASE_DIR`). What is served is built by one factory,
`agent.runner.studio_graph.studio_parts`: the agent graph (compiled without a checkpointer, as `langgraph dev`
requires, with a default context so runs without one execute the same nodes, tools and journal as
`agentrt run`) and our JSONL saver.

The server loads this module in a worker thread but calls factories on its event loop, where any
blocking file access fails; so both are built once here, at import time, and exported as plain
objects (`agent_graph`, `checkpointer`).
"""

from __future__ import annotations

import os

from agent.runner.studio_graph import studio_parts

CONFIG_ENV = "AGENTRT_CONFIG"

agent_graph, checkpointer = studio_parts(os.environ.get(CONFIG_ENV) or None)
