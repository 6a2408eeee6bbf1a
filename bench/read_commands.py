"""The read commands against a bare LangGraph turn, each as a fresh process.

The anchor is the script a user would otherwise write: a StateGraph of two model calls (plan,
answer; a fake chat model with two replies) checkpointed by SqliteSaver with durability "sync",
one turn, run as `python bare_turn.py`. Each read command of the `agentrt` console script runs on
the embedded default in a temporary folder holding a session `agentrt run "hi"` left paused for an
approval. Anchor and commands run in rounds (one of each per round, so a busy machine slows them
alike); printed: the median of the rounds, the ratio to the anchor's median and the goal (0.3x).
Nothing is asserted. `--pythonpath DIR` measures another checkout (e.g. main, for "before").

    python bench/read_commands.py [--runs 7] [--pythonpath DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cli_timing import add_options, agentrt, wall_time

GOAL = 0.3

BARE_TURN = """
import sqlite3
import sys

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

model = GenericFakeChatModel(messages=iter([AIMessage("1. look 2. answer"), AIMessage("Hello!")]))


def plan(state: MessagesState) -> dict:
    return {"messages": [model.invoke(state["messages"])]}


def answer(state: MessagesState) -> dict:
    return {"messages": [model.invoke(state["messages"])]}


g = StateGraph(MessagesState)
g.add_node("plan", plan)
g.add_node("answer", answer)
g.add_edge(START, "plan")
g.add_edge("plan", "answer")
g.add_edge("answer", END)
graph = g.compile(checkpointer=SqliteSaver(sqlite3.connect(sys.argv[1], check_same_thread=False)))
out = graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}}, durability="sync")
print(out["messages"][-1].content)
"""


def main() -> int:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser)
    args = parser.parse_args()
    exe = agentrt()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    env["PYTHONPATH"] = args.pythonpath
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bare = work / "bare_turn.py"
        bare.write_text(BARE_TURN, encoding="utf-8")
        made = subprocess.run([exe, "run", "--json", "hi"], cwd=work, env=env, capture_output=True, text=True)
        sid = json.loads(made.stdout)["session_id"]
        commands: dict[str, list[str]] = {
            "show": [exe, "show", sid],
            "show --json": [exe, "show", sid, "--json"],
            "sessions": [exe, "sessions"],
            "tool-result": [exe, "tool-result", sid, "call_3_1"],
            "doctor": [exe, "doctor", sid],
            "show (unknown id)": [exe, "show", "s-0123456789abcdef"],
            "config error": [exe, "show", sid, "--config", "missing.yaml"],
        }
        anchor_argv = [sys.executable, str(bare), str(work / "bare.sqlite")]
        times: dict[str, list[float]] = {name: [] for name in ["anchor", *commands]}
        for argv in [anchor_argv, *commands.values()]:  # warm the file cache
            wall_time(argv, work, env)
        for i in range(args.runs):
            times["anchor"].append(
                wall_time([*anchor_argv[:-1], str(work / f"bare{i}.sqlite")], work, env)
            )  # a fresh file
            for name, argv in commands.items():
                times[name].append(wall_time(argv, work, env))
    anchor = statistics.median(times["anchor"])
    print(f"read commands vs a bare LangGraph turn (SqliteSaver, durability sync); {args.runs} rounds, median")
    print(f"checkout {args.pythonpath}")
    print(f"{'process':<26} {'median s':>9} {'best s':>8} {'ratio':>7} {'goal':>6}")
    print(f"{'bare LangGraph turn':<26} {anchor:>9.3f} {min(times['anchor']):>8.3f} {1:>6.2f}x {'':>6}")
    for name in commands:
        med = statistics.median(times[name])
        print(f"{'agentrt ' + name:<26} {med:>9.3f} {min(times[name]):>8.3f} {med / anchor:>6.2f}x {GOAL:>5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
