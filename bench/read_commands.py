"""The read commands against a bare LangGraph turn, each as a fresh process.

The anchor is the script a user would otherwise write: a StateGraph of two model calls (plan,
answer; a fake chat model with two replies) checkpointed by SqliteSaver with durability "sync",
one turn, run as `python bare_turn.py`. Each read command of the `agentrt` console script runs on
the embedded default in a temporary folder holding a session `agentrt run "hi"` left paused for an
approval. Anchor and commands run in rounds (one of each per round, so a busy machine slows them
alike); printed: the median of the rounds, the ratio to the anchor's median and the goal (0.3x).
Nothing is asserted. `--pythonpath DIR` measures another checkout (e.g. main, for "before").

`--store postgres` runs the commands on the production config instead (configs/production.yaml:
the record store, the session table and the lease in PostgreSQL, Redis as L2), on a database of
its own made by `agentrt db init` and dropped at the end (AGENTRT_DATABASE_URL names the server,
default postgresql://postgres@127.0.0.1:5432/test; AGENTRT_REDIS_URL the Redis); goal 0.5x.
Each command's CPU seconds (user + system) are printed beside the wall time: on a busy machine
the wall time mostly measures waiting for a core.

    python bench/read_commands.py [--runs 7] [--pythonpath DIR] [--store files|postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import yaml
from cli_timing import ROOT, add_options, agentrt, byte_compile, wall_and_cpu

GOALS = {"files": 0.3, "postgres": 0.5}
SERVER = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")

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


def postgres_config(work: Path) -> tuple[Path, str]:
    """configs/production.yaml on a database of its own and `work`'s base_dir: (config, database)."""
    data = yaml.safe_load((ROOT / "configs" / "production.yaml").read_text())
    database = f"agentrt_reads_{uuid.uuid4().hex[:10]}"
    data["persistence"]["base_dir"] = str(work / "agentrt")
    data["persistence"]["database_url"] = SERVER.rsplit("/", 1)[0] + f"/{database}"
    if os.environ.get("AGENTRT_REDIS_URL"):
        data["persistence"]["redis_url"] = os.environ["AGENTRT_REDIS_URL"]
    path = work / "agentrt.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, database


def drop_database(name: str) -> None:
    """Drop the bench's database (its pools are in the command processes, all ended)."""
    import psycopg

    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> int:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser)
    parser.add_argument("--store", choices=sorted(GOALS), default="files", help="the embedded default or postgres")
    args = parser.parse_args()
    byte_compile(args.pythonpath)
    exe = agentrt()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    env["PYTHONPATH"] = args.pythonpath
    database = None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        conf: list[str] = []
        if args.store == "postgres":
            path, database = postgres_config(work)
            conf = ["--config", str(path)]
            made = subprocess.run([exe, "db", "init", *conf], cwd=work, env=env, capture_output=True, text=True)
            if made.returncode != 0:
                raise SystemExit(f"agentrt db init failed: {made.stderr}")
        try:
            times = measure(args, exe, env, work, conf)
        finally:
            if database is not None:
                drop_database(database)
    goal = GOALS[args.store]
    anchor, anchor_cpu = (statistics.median(t) for t in zip(*times["anchor"], strict=True))
    print(f"read commands vs a bare LangGraph turn (SqliteSaver, durability sync); {args.runs} rounds, median")
    print(f"checkout {args.pythonpath}; store {args.store}")
    print(f"{'process':<26} {'median s':>9} {'best s':>8} {'ratio':>7} {'CPU s':>7} {'CPU ratio':>9} {'goal':>6}")
    for name, runs in times.items():
        med, cpu = (statistics.median(t) for t in zip(*runs, strict=True))
        label = "bare LangGraph turn" if name == "anchor" else "agentrt " + name
        print(
            f"{label:<26} {med:>9.3f} {min(w for w, _ in runs):>8.3f} {med / anchor:>6.2f}x "
            f"{cpu:>7.3f} {cpu / anchor_cpu:>8.2f}x {'' if name == 'anchor' else f'{goal:.1f}x':>6}"
        )
    return 0


def measure(
    args: argparse.Namespace, exe: str, env: dict[str, str], work: Path, conf: list[str]
) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of the anchor and of each command, per round."""
    bare = work / "bare_turn.py"
    bare.write_text(BARE_TURN, encoding="utf-8")
    made = subprocess.run([exe, "run", "--json", *conf, "hi"], cwd=work, env=env, capture_output=True, text=True)
    if made.returncode != 0:
        raise SystemExit(f"agentrt run failed: {made.stderr}")
    sid = json.loads(made.stdout)["session_id"]
    commands: dict[str, list[str]] = {
        "show": [exe, "show", sid, *conf],
        "show --json": [exe, "show", sid, "--json", *conf],
        "sessions": [exe, "sessions", *conf],
        "tool-result": [exe, "tool-result", sid, "call_3_1", *conf],
        "doctor": [exe, "doctor", sid, *conf],
        "show (unknown id)": [exe, "show", "s-0123456789abcdef", *conf],
        "config error": [exe, "show", sid, "--config", "missing.yaml"],
    }
    anchor_argv = [sys.executable, str(bare), str(work / "bare.sqlite")]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ["anchor", *commands]}
    for argv in [anchor_argv, *commands.values()]:  # warm the file cache
        wall_and_cpu(argv, work, env)
    for i in range(args.runs):
        fresh = [*anchor_argv[:-1], str(work / f"bare{i}.sqlite")]  # a fresh file
        times["anchor"].append(wall_and_cpu(fresh, work, env))
        for name, argv in commands.items():
            times[name].append(wall_and_cpu(argv, work, env))
    return times


if __name__ == "__main__":
    sys.exit(main())
