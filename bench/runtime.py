"""Benchmark: whole-runtime cost of one agentrt turn against a bare LangGraph ReAct loop.

Workload: the scripted model asks for one tool call per model call; the tool returns 2 KB. One
turn of N tool steps (planning off, compression on with a window large enough never to compress,
durability sync, `fsync: always`). The anchor is a bare LangGraph ReAct loop doing the same work in
the same run: a model node (the same scripted model) + `ToolNode` + `add_messages`, with
SqliteSaver, and the same loop on agentrt's JsonlCheckpointSaver ("the saver alone").

Both make two supersteps per tool step (agentrt's reasoning and acting; the bare loop's model and
tools), so agentrt / bare loop on the JSONL saver is what the runtime adds around the saver, and
each side minus the bare loop with no checkpointer is its own cost beyond LangGraph's. The bare
loop also runs on InMemorySaver and with no checkpointer (the floors).

Every measurement runs in a fresh child process (so peak memory is that run's), in the same
invocation of this script. Each child calls `gc.freeze()` once its runner or graph is built, as
`agentrt run` does: the collector's full passes then walk only what the turn allocates, not the
~150,000 objects of the imports (without it each full pass costs ~0.1 s, in both loops). Printed:

- ms per tool step (median over rounds) for agentrt and the bare loops, and the ratio;
- flatness: mean ms over steps 150-200 / mean over steps 1-50 (N >= 200), and the last 50 steps /
  the first 50 (N > 100);
- bytes on disk after the turn and the growth exponent between the smallest and largest N;
- bytes of agentrt by kind (checkpoints, events, journal, chat SQLite, blobs, other);
- fsyncs per tool step (os.fsync/os.fdatasync calls counted in the child; `--strace` adds
  `strace -c -f` counts of fsync/fdatasync/write/openat, which include SQLite's own), and the
  marginal fsyncs per tool step, (fsyncs(Nmax) - fsyncs(Nmin)) / (Nmax - Nmin), with the per-turn
  constant fsyncs(Nmin) - marginal * Nmin;
- peak memory (ru_maxrss of the child) and its ratio agentrt / bare SqliteSaver loop;
- next turn / `show` / `doctor` / `resume` of a 20-step vs the largest session (wall of the CLI
  process, and the same minus `agentrt --help`, i.e. the work beyond the process start).

    python bench/runtime.py                       # N = 50, 200, 1000; 1 round
    python bench/runtime.py --steps 50 200 --rounds 3
    python bench/runtime.py --steps 50 --strace --profile /tmp/agentrt.prof

Nothing is asserted: the goals are printed beside the figures.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STAMPS: list[float] = []
CPU_STAMPS: list[float] = []
RESULT_BYTES = 2048
NEXT_TURN = "And one more thing?"


def blob2k(i: int) -> str:
    """The benchmark's trivial tool: 2 KB of text (and a timestamp of when it ran)."""
    STAMPS.append(time.perf_counter())
    CPU_STAMPS.append(time.process_time())  # all threads: the saver's work in LangGraph's pool counts
    line = f"result {i}: " + "lorem ipsum dolor sit amet " * 80
    return line[:RESULT_BYTES]


# --- children ------------------------------------------------------------------------------------
def _count_fsyncs() -> dict[str, int]:
    counts = {"fsync": 0}
    for name in ("fsync", "fdatasync"):
        orig = getattr(os, name)

        def wrapped(fd: Any, _orig: Any = orig) -> None:
            counts["fsync"] += 1
            _orig(fd)

        setattr(os, name, wrapped)
    return counts


def _script(n: int) -> dict[str, Any]:
    calls = [
        {"tool_calls": [{"name": "blob2k", "args": {"i": i}}], "usage": {"input_tokens": 100, "output_tokens": 10}}
        for i in range(n)
    ]
    done = [
        {"content": "Done.", "usage": {"input_tokens": 100, "output_tokens": 2}},
        *[{"content": "Nothing else.", "usage": {"input_tokens": 100, "output_tokens": 3}}] * 4,
    ]
    return {"responses": [*calls, *done]}


def write_config(work: Path, n: int) -> Path:
    """The agentrt config of an N-step run under `work`."""
    import yaml

    (work / "script.yaml").write_text(json.dumps(_script(n)))
    cfg = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    cfg["model"].update({"script": str(work / "script.yaml"), "context_window": 100_000_000})
    cfg["tools"] = {
        "builtins": ["read_tool_result"],
        "custom": [{"path": "bench.runtime:blob2k", "effect": "read_only"}],
    }
    cfg["loop"].update({"max_iterations": n + 10, "planning": "never"})
    cfg["persistence"]["base_dir"] = str(work / "agentrt")
    cfg["datasets"] = []
    cfg["skills_dir"] = None
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


def _steps(stamps: list[float]) -> list[float]:
    """ms between consecutive tool calls: the cost of one tool step (model call + tool + bookkeeping)."""
    return [(b - a) * 1000 for a, b in itertools.pairwise(stamps)]


def child_agentrt(work: Path, n: int, profile: str | None) -> dict[str, Any]:
    """One agentrt turn of n tool steps."""
    from runtime_report import bytes_by_kind

    counts = _count_fsyncs()
    sys.path.insert(0, str(CODE))
    import bench.runtime as me
    from agent.runner import AgentRunner

    runner = AgentRunner.from_config(write_config(work, n))
    gc.freeze()  # as `agentrt run` does once its runner is built (agent.cli.common.runner)
    counts["fsync"] = 0
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    result = runner.run("Call the tool until done.", new_session_id="s-bench")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    assert result.status == "COMPLETED", result
    return {
        "steps": _steps(me.STAMPS),
        "wall": wall,
        "cpu_ms": _mean(_steps(me.CPU_STAMPS)),
        "cpu_steps": _steps(me.CPU_STAMPS),
        "cpu_turn_s": cpu,
        "fsyncs": counts["fsync"],
        "bytes": _dir_bytes(work / "agentrt"),
        "by_kind": bytes_by_kind(work / "agentrt"),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tool_calls": result.tool_calls,
    }


def child_bare(work: Path, n: int, saver_name: str) -> dict[str, Any]:
    """The bare LangGraph ReAct loop: model node + ToolNode + add_messages, checkpointed."""
    counts = _count_fsyncs()
    sys.path.insert(0, str(CODE))
    import sqlite3

    from langchain_core.messages import HumanMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    import bench.runtime as me
    from agent.loop.models import ModelScript, ScriptedChatModel

    model = ScriptedChatModel(script=ModelScript.model_validate(_script(n))).bind_tools([me.blob2k])

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("model", call_model)
    g.add_node("tools", ToolNode([me.blob2k]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    root = work / saver_name
    root.mkdir(parents=True)
    saver: Any
    if saver_name == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(sqlite3.connect(root / "bench.sqlite", check_same_thread=False))
    elif saver_name == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        saver = InMemorySaver()
    elif saver_name == "none":
        saver = None
    else:
        from checkpointing.saver import JsonlCheckpointSaver

        saver = JsonlCheckpointSaver(root, fsync="always")
    graph = g.compile(checkpointer=saver)
    gc.freeze()  # like for like: the agentrt child freezes what its start-up built, as the CLI does
    counts["fsync"] = 0
    t0, c0 = time.perf_counter(), time.process_time()
    graph.invoke(
        {"messages": [HumanMessage("Call the tool until done.")]},
        {"configurable": {"thread_id": "s-bench"}, "recursion_limit": 4 * n + 20},
        # LangGraph refuses a durability without a checkpointer (the floor without one).
        **({"durability": "sync"} if saver is not None else {}),
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "steps": _steps(me.STAMPS),
        "wall": wall,
        "cpu_ms": _mean(_steps(me.CPU_STAMPS)),
        "cpu_steps": _steps(me.CPU_STAMPS),
        "cpu_turn_s": cpu,
        "fsyncs": counts["fsync"],
        "bytes": _dir_bytes(root),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tool_calls": len(me.STAMPS),
    }


def child_commands(work: Path) -> dict[str, Any]:
    """The work of show / doctor / resume / next turn on the session under `work`, in this process
    (the runner built once first, so only each command's own reads and writes are timed)."""
    sys.path.insert(0, str(CODE))
    from agent.doctor import run_doctor
    from agent.runner import AgentRunner

    runner = AgentRunner.from_config(work / "config.yaml")
    gc.freeze()  # as the CLI does once its runner is built (agent.cli.common.runner)
    timed: dict[str, Any] = {}

    def clock(name: str, fn: Any) -> None:
        t0 = time.perf_counter()
        fn()
        timed[name] = time.perf_counter() - t0

    clock("show", lambda: runner.show("s-bench"))
    clock("doctor", lambda: run_doctor(runner, "s-bench"))
    clock("resume", lambda: runner.resume("s-bench"))
    clock("next_turn", lambda: runner.run(NEXT_TURN, session_id="s-bench"))
    return timed


# --- parent --------------------------------------------------------------------------------------
CODE = ROOT
"""The checkout whose `agent` the children import (`--code`: compare another checkout's figures)."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(CODE) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_child(kind: str, work: Path, n: int, *, strace: bool = False, profile: str | None = None) -> dict[str, Any]:
    """Run one measurement in a fresh process; returns its JSON figures (plus strace counts)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--dir", str(work), "--n", str(n)]
    cmd += ["--code", str(CODE)]
    if profile:
        cmd += ["--profile", profile]
    trace = work.parent / f"{work.name}.strace"
    if strace:
        cmd = ["strace", "-c", "-f", "-e", "trace=fsync,fdatasync,write,openat", "-o", str(trace), *cmd]
    out = subprocess.run(cmd, env=_env(), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child {kind} n={n} failed:\n{out.stderr[-3000:]}")
    data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if strace:
        from runtime_report import parse_strace

        data["strace"] = parse_strace(trace.read_text())
    return data


def _mean(xs: list[float]) -> float:
    return statistics.mean(xs) if xs else float("nan")


def main() -> None:
    """Parse arguments; run the children; print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[50, 200, 1000])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--strace", action="store_true", help="also count syscalls with strace -c -f")
    ap.add_argument("--profile", help="cProfile the agentrt run of the largest N into this file")
    ap.add_argument("--no-sessions", action="store_true", help="skip the show/doctor/resume/next-turn figures")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument(
        "--on",
        nargs=2,
        metavar=("SMALL", "LARGE"),
        help="only the session figures, on copies of two existing bench sessions (folders with config.yaml)",
    )
    ap.add_argument("--code", help="the checkout the commands import (default: this one)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    # Only the parent prints: the children and `agentrt` (which imports this module for its tool)
    # have no `bench/` on their path.
    import runtime_sessions
    from runtime_report import report
    from runtime_sessions import sessions, sessions_on

    global CODE
    CODE = Path(args.code).resolve() if args.code else ROOT
    runtime_sessions.CODE = CODE
    if args.child:
        work = Path(args.dir)
        work.mkdir(parents=True, exist_ok=True)
        if args.child == "agentrt":
            data = child_agentrt(work, args.n, args.profile)
        elif args.child == "commands":
            data = child_commands(work)
        else:
            data = child_bare(work, args.n, args.child.partition("-")[2])
        print(json.dumps(data))
        return

    top = Path(tempfile.mkdtemp(prefix="agentrt-bench-runtime-"))
    if args.on:
        try:
            sessions_on(top, Path(args.on[0]), Path(args.on[1]))
        finally:
            shutil.rmtree(top, ignore_errors=True)
        return
    kinds = ("agentrt", "bare-sqlite", "bare-jsonl", "bare-memory", "bare-none")
    res: dict[tuple[str, int], list[dict[str, Any]]] = {}
    try:
        for n in args.steps:
            for r in range(args.rounds):
                for kind in kinds:  # interleaved: the same machine state for all of them
                    work = top / f"{kind}-{n}-{r}"
                    profile = args.profile if (kind == "agentrt" and n == max(args.steps) and r == 0) else None
                    data = run_child(kind, work, n, strace=args.strace, profile=profile)
                    res.setdefault((kind, n), []).append(data)
                    print(
                        f"  {kind:12} N={n:5} round {r + 1}: {_mean(data['steps']):7.2f} ms/step, "
                        f"{data['bytes'] / 1e6:8.2f} MB, {data['fsyncs'] / n:5.1f} fsyncs/step, "
                        f"{data['rss_mb']:6.0f} MB peak, {data['cpu_ms']:6.2f} CPU ms/step",
                        flush=True,
                    )
        report(args, res)
        if not args.no_sessions:
            sessions(args, top, run_child)
    finally:
        if args.keep:
            print(f"work folder kept: {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
