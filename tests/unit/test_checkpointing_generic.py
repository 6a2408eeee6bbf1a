"""`checkpointing` knows nothing of agentrt: no imports of ours, no private LangGraph modules, no
agentrt words; a LangGraph user runs the saver and the event log with no agentrt concept."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "checkpointing"
OURS = ("agent", "graph", "nodes")
PRIVATE_ALLOWED = {("langgraph.checkpoint.serde.types", "_DeltaSnapshot")}
"""LangGraph's DeltaChannel snapshot has no public name; the codec must recognise it."""


def _modules() -> list[tuple[str, ast.Module]]:
    return [(p.name, ast.parse(p.read_text(), str(p))) for p in sorted(PACKAGE.rglob("*.py"))]


def test_checkpointing_imports_nothing_of_ours_and_no_private_langgraph_module() -> None:
    """Every import of the package: none of agent/graph/nodes, no `langgraph._internal`, no
    underscore name of LangGraph's but the one without a public name."""
    bad = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods = [(node.module, a.name) for a in node.names]
            else:
                continue
            for mod, what in mods:
                top = mod.split(".")[0]
                private_mod = any(part.startswith("_") for part in mod.split("."))
                private_name = top in ("langgraph", "langchain_core") and what is not None and what.startswith("_")
                if top in OURS or (top in ("langgraph", "langchain_core") and private_mod):
                    bad.append(f"{name}: {mod}")
                elif private_name and (mod, what) not in PRIVATE_ALLOWED:
                    bad.append(f"{name}: {mod}.{what}")
    assert bad == []


def test_checkpointing_text_names_no_agentrt() -> None:
    """No string (messages, docstrings) nor comment of the package says agentrt or its CLI."""
    hits = [
        f"{p.name}:{i}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "agentrt" in line.lower()
    ]
    assert hits == []


USER_PROGRAM = r"""
import operator, sys, tempfile
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from checkpointing import JsonlCheckpointSaver
from checkpointing.entry_log import EventLog

class S(TypedDict):
    log: Annotated[list[str], operator.add]

base = tempfile.mkdtemp()
saver = JsonlCheckpointSaver(base)
b = StateGraph(S)
b.add_node("a", lambda s: {"log": ["a"]})
b.add_edge(START, "a")
b.add_edge("a", END)
g = b.compile(checkpointer=saver)
saver.allow_graph(g)
cfg = {"configurable": {"thread_id": "any thread: not an id / at all"}}
g.invoke({"log": []}, cfg)
g.invoke({"log": ["again"]}, cfg)
assert JsonlCheckpointSaver(base).get_tuple(cfg).checkpoint["channel_values"]["log"] == ["a", "again", "a"]

log = EventLog(base, "default", "t1")
log.create({"tenant_id": "default", "session_id": "t1"})
first = log.append("started", {"n": 1})
log.append("whatever I call it", {}, parent_id=first.id)
assert [e.type for e in EventLog(base, "default", "t1").entries()] == ["started", "whatever I call it"]
ours = sorted(m for m in sys.modules if m.split(".")[0] in ("agent", "graph", "nodes"))
assert not ours, ours
print("ok")
"""


def test_a_langgraph_user_needs_no_agentrt_concept() -> None:
    """Any graph, any thread_id, an event log with types of the user's own: in a process that
    never imports agent, graph or nodes."""
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    run = subprocess.run(
        [sys.executable, "-c", USER_PROGRAM], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
