"""One short turn as a fresh process: `agentrt run "hi"` against a bare LangGraph script doing it.

agentrt runs on the embedded default (configs/default.yaml: JSONL checkpoints with `fsync:
always`, the session table in SQLite, a file lease) with a two-response script: the plan, then
the answer. The anchor is the script a user would otherwise write: a StateGraph of the same two
model calls (a fake chat model with two replies) checkpointed by SqliteSaver with durability
"sync", one turn, run as `python bare_turn.py`. Beside them, two floors: the interpreter alone
(`python -c pass`) and the import floor, a process that only imports what the bare script
imports. Each round runs all four once (paired: a busy machine slows them alike); printed are the
medians of the rounds and:

- the ratio agentrt / bare script (the goal: 1.0x);
- each one's cost beyond the import floor, and their ratio (the goal where 1.0x is below the
  floor: agentrt's cost beyond the bare script's imports within the bare script's cost beyond them);
- the same first turn in an empty folder (the session table created, as on a first run).

Nothing is asserted. `--pythonpath DIR` measures another checkout (e.g. main, for "before").

    python bench/short_turn.py [--runs 7] [--pythonpath DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from cli_timing import ROOT, add_options, byte_compile, wall_and_cpu

GOAL = 1.0

BARE_IMPORTS = """
import sqlite3
import sys

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
"""

BARE_TURN = (
    BARE_IMPORTS
    + """
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
)

SCRIPT = {
    "responses": [
        {"content": json.dumps({"plan": "Greet the user.", "todos": ["Say hello"]})},
        {"content": "Hello!"},
    ]
}


def _agentrt_folder(work: Path) -> Path:
    """A folder holding configs/default.yaml with the two-response script (its store under it)."""
    work.mkdir(parents=True)
    (work / "script.yaml").write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    cfg = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text(encoding="utf-8"))
    cfg["model"]["script"] = "script.yaml"
    (work / "agentrt.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return work


def _check(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    """Fail loudly when a measured command does not do its work (a fast failure is no figure)."""
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0 or "Hello!" not in out.stdout:
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}")


def main() -> int:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser)
    args = parser.parse_args()
    byte_compile(args.pythonpath)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    env["PYTHONPATH"] = args.pythonpath
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "bare_turn.py").write_text(BARE_TURN, encoding="utf-8")
        (work / "bare_imports.py").write_text(BARE_IMPORTS, encoding="utf-8")
        folder = _agentrt_folder(work / "agentrt")
        run = [py, "-m", "agent.cli", "run", "--config", str(folder / "agentrt.yaml"), "hi"]
        _check(run, folder, env)  # the store exists from here on: the figure is a turn, not a set-up
        _check([py, str(work / "bare_turn.py"), str(work / "warm.sqlite")], work, env)
        sides = {
            "python -c pass": lambda i: wall_and_cpu([py, "-c", "pass"], work, env),
            "import floor": lambda i: wall_and_cpu([py, str(work / "bare_imports.py")], work, env),
            "bare LangGraph turn": lambda i: wall_and_cpu(
                [py, str(work / "bare_turn.py"), str(work / f"bare{i}.sqlite")], work, env
            ),  # a fresh file each round
            "agentrt run": lambda i: wall_and_cpu(run, folder, env),
            "agentrt run, new folder": lambda i: _fresh(work, i, env),
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for i in range(args.runs):
            for name, side in sides.items():
                times[name].append(side(i))
    print(f"one short turn as a fresh process; {args.runs} paired rounds, median; checkout {args.pythonpath}")
    for k, what in enumerate(("wall", "CPU (user + system)")):
        _report(what, {name: [t[k] for t in ts] for name, ts in times.items()})
    return 0


def _report(what: str, times: dict[str, list[float]]) -> None:
    """The table and the goal lines of one measure (wall or CPU seconds)."""
    med = {name: statistics.median(ts) for name, ts in times.items()}
    bare, ours, floor = med["bare LangGraph turn"], med["agentrt run"], med["import floor"]
    print(f"\n== {what} seconds")
    print(f"{'process':<28} {'median s':>9} {'best s':>8} {'/ bare':>7} {'beyond floor s':>15}")
    for name, ts in times.items():
        print(f"{name:<28} {med[name]:>9.3f} {min(ts):>8.3f} {med[name] / bare:>6.2f}x {med[name] - floor:>15.3f}")
    print(f"agentrt run / bare turn: {ours / bare:.2f}x (goal <= {GOAL:.1f}x)")
    print(f"import floor / bare turn: {floor / bare:.2f}x")
    said = f"cost beyond the import floor: agentrt {ours - floor:.3f} s, bare {bare - floor:.3f} s"
    if bare > floor:
        ratio = (ours - floor) / (bare - floor)
        print(f"{said} = {ratio:.2f}x (the goal where 1.0x overall is below what the imports allow: <= 1.0x)")
    else:  # the bare turn costs no more than its imports: a ratio would divide by noise
        print(f"{said} (the bare turn is within its import floor here: no ratio; the overall ratio above applies)")


def _fresh(work: Path, i: int, env: dict[str, str]) -> tuple[float, float]:
    """The first turn in an empty folder: the session table and the store are created."""
    folder = _agentrt_folder(work / f"fresh{i}")
    try:
        return wall_and_cpu(
            [sys.executable, "-m", "agent.cli", "run", "--config", str(folder / "agentrt.yaml"), "hi"], folder, env
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
