"""Benchmark: JsonlCheckpointSaver against LangGraph's stock savers on one agent-like workload.

The workload: an agent loop where every step is one model turn (an AI message with a tool call)
and one tool result (2 KB, every tenth one 50 KB), on a `messages` channel that uses either plain
`add_messages` ("plain" mode) or LangGraph's beta `DeltaChannel` ("delta" mode). Each saver
(JSONL with the `--jsonl-fsync` policy, JSONL with `fsync: checkpoint`, InMemorySaver, SqliteSaver,
PostgresSaver on the local server, and no persistence at all) runs it in the same process, in
interleaved rounds. Printed per mode: ms/step, bytes stored after N steps, the storage growth
exponent, and the latency of `get_state` / `get_tuple` on the latest checkpoint after 100/1000
steps, each also as a ratio to SqliteSaver. Then the floor (the graph with no checkpointer, and
with InMemorySaver, as a ratio to SqliteSaver: when even no saver costs more than half of
SqliteSaver's ms/step, no saver can reach 0.5x) and each saver's own cost (its ms/step minus the
no-saver ms/step of the same round) as a ratio to SqliteSaver's own cost. Then "jsonl" against
its durable floor: an untimed run records the very bytes it appended and the fdatasyncs it issued
(`durable_floor.trace`), each round replays them alone in a fresh folder (`durable_floor.replay`),
and the floor is that round's no-saver ms/step plus the replay's ms/step (goal: jsonl within
1.15x); "floor" does those appends and syncs at the saver's calls in a graph run, and jsonl's CPU
in its calls is printed (`durable_floor.floor_report`). `time^` is the growth exponent of the
run's time (steps/4 -> steps; 1.0: each step costs the same), `growth^` that of the bytes stored.
Nothing is asserted.

    python bench/checkpointers.py                      # defaults finish in about 2-3 minutes
    python bench/checkpointers.py --plain-steps 400 --delta-steps 2000 --rounds 3
    python bench/checkpointers.py --jsonl-fsync batch     # "jsonl" durable at flush() only

"jsonl" uses `--jsonl-fsync` (default "always": every put and put_writes durable when it returns);
"jsonl-ckpt" uses "checkpoint" (pending writes reach disk with the next checkpoint of the run: one
fdatasync per superstep, the group commit).

PostgreSQL: AGENTRT_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test); the bench
works in a schema of its own and drops it at the end.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import random
import shutil
import statistics
import string
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from checkpointing.fsyncs import fsync_count
from checkpointing.saver import JsonlCheckpointSaver

sys.path.insert(0, str(Path(__file__).resolve().parent))
from durable_floor import ReplaySaver, floor_report, replay, summary, trace

import checkpointing._saver_spill as spill_module

SAVERS = ("jsonl", "jsonl-ckpt", "memory", "sqlite", "postgres", "none", "floor")
MILESTONES = (100, 1000)
JSONL_FSYNC = {"policy": "always"}
FLOOR_OPS: list = []  # what "floor" replays: the untimed jsonl run's trace (`durable_floor.ReplaySaver`)


def _delta_add_messages(state: list, writes: list) -> list:
    merge: Callable[[Any, Any], Any] = add_messages
    return functools.reduce(merge, writes, state)


class PlainState(TypedDict):
    messages: Annotated[list, add_messages]
    i: int


class DeltaState(TypedDict):
    messages: Annotated[list, DeltaChannel(_delta_add_messages, snapshot_frequency=50)]
    i: int


def build_graph(mode: str, checkpointer: Any, limit: dict[str, int], state: Any = None) -> Any:
    """The agent loop; it stops when the step counter reaches limit["n"]. `state`: another state
    schema than the mode's (e.g. a DeltaChannel snapshotting at another frequency)."""
    rnd = random.Random(7)

    def agent(s: dict[str, Any]) -> dict[str, Any]:
        call = {"id": f"c{s['i']}", "name": "search", "args": {"q": f"query {s['i']}"}}
        return {"messages": [AIMessage(f"step {s['i']}: calling search", tool_calls=[call])], "i": s["i"] + 1}

    def tools(s: dict[str, Any]) -> dict[str, Any]:
        size = 50_000 if s["i"] % 10 == 0 else 2_000
        body = "".join(rnd.choices(string.ascii_letters + " ", k=size))
        return {"messages": [ToolMessage(body, tool_call_id=f"c{s['i'] - 1}")]}

    b: Any = StateGraph(state or (DeltaState if mode == "delta" else PlainState))
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["i"] <= limit["n"] else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=checkpointer)


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _memory_bytes(saver: InMemorySaver) -> int:
    total = sum(len(v[1]) for v in saver.blobs.values() if isinstance(v[1], bytes))
    for ns_map in saver.storage.values():
        for cps in ns_map.values():
            total += sum(len(c[0][1]) + len(c[1][1]) for c in cps.values())
    for w in saver.writes.values():
        total += sum(len(x[2][1]) for x in w.values())
    return total


def make_saver(name: str, work: Path) -> tuple[Any, Callable[[], int | None], Callable[[], None]]:
    """(saver, bytes-stored function, close function) for a saver name."""
    if name in ("jsonl", "jsonl-ckpt"):
        root = work / "jsonl"
        policy = JSONL_FSYNC["policy"] if name == "jsonl" else "checkpoint"
        return JsonlCheckpointSaver(root, fsync=policy), lambda: _dir_bytes(root), lambda: None
    if name == "memory":
        mem = InMemorySaver()
        return mem, lambda: _memory_bytes(mem), lambda: None
    if name == "none":
        return None, lambda: None, lambda: None
    if name == "floor":
        replayer = ReplaySaver(FLOOR_OPS, work / "floor")
        return replayer, lambda: None, replayer.close
    if name == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        (work / "sqlite").mkdir()
        conn = sqlite3.connect(work / "sqlite" / "bench.sqlite", check_same_thread=False)
        return SqliteSaver(conn), lambda: _dir_bytes(work / "sqlite"), conn.close
    if name == "postgres":
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        url = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        pconn: Any = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        pconn.execute(f"CREATE SCHEMA {schema}")
        pconn.execute(f"SET search_path TO {schema}")
        pg = PostgresSaver(pconn)
        pg.setup()

        def size() -> int:
            row = pconn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(format('%%I.%%I', schemaname, tablename))), 0) AS b "
                "FROM pg_tables WHERE schemaname = %s",
                (schema,),
            ).fetchone()
            return int(row["b"]) if row else 0

        def close() -> None:
            pconn.execute(f"DROP SCHEMA {schema} CASCADE")
            pconn.close()

        return pg, size, close
    raise ValueError(f"unknown saver {name!r}")


def _median_ms(fn: Callable[[], Any], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def run_one(name: str, mode: str, steps: int, ops: list | None = None) -> dict[str, Any]:
    """Run the workload on one saver; measures at the milestones and at steps/4 and steps. With
    `ops`, the writes and syncs of the saver's folder are recorded there (`durable_floor.trace`)."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    if ops is not None:
        with trace(work) as traced:
            out = _run_in(work, name, mode, steps)
        ops.extend(traced)
        return out
    return _run_in(work, name, mode, steps)


def _run_in(work: Path, name: str, mode: str, steps: int) -> dict[str, Any]:
    saver, size, close = make_saver(name, work)
    limit = {"n": 0}
    graph = build_graph(mode, saver, limit)
    thread = f"bench-{uuid.uuid4().hex[:8]}"
    cfg: RunnableConfig = {"configurable": {"thread_id": thread}, "recursion_limit": 10 * steps + 100}
    marks = sorted({m for m in MILESTONES if m <= steps} | {max(1, steps // 4), steps})
    out: dict[str, Any] = {"bytes": {}, "get_state": {}, "get_tuple": {}, "ms": 0.0, "elapsed": {}}
    elapsed, state = 0.0, None
    fsyncs = fsync_count()
    cpu: dict[str, float] = {"calls": 0.0, "list check": 0.0}
    if name.startswith("jsonl"):
        _cpu_counted(saver, cpu)
    try:
        for mark in marks:
            limit["n"] = mark
            t0 = time.perf_counter()
            inp: dict[str, Any] = {"messages": [HumanMessage("go on")]}
            if state is None:
                inp["i"] = 0
            elif saver is None:  # no persistence: the caller carries the state
                inp = {"messages": [*state["messages"], HumanMessage("go on")], "i": state["i"]}
            state = graph.invoke(inp, cfg)
            elapsed += time.perf_counter() - t0
            out["elapsed"][mark] = elapsed
            if saver is None:
                continue
            out["bytes"][mark] = size()
            out["get_state"][mark] = _median_ms(lambda: graph.get_state(cfg))
            out["get_tuple"][mark] = _median_ms(lambda: saver.get_tuple(cfg))
        out["ms"] = elapsed * 1000 / steps
        # Counted in checkpointing/fsyncs.py; only our saver's fsyncs go through it (and reads cost none).
        out["fsync"] = (fsync_count() - fsyncs) / steps if name.startswith("jsonl") else None
        out["cpu"] = {k: v * 1000 / steps for k, v in cpu.items()} if name.startswith("jsonl") else None
    finally:
        spill_module.reusable = _REUSABLE
        close()
        shutil.rmtree(work, ignore_errors=True)
    return out


_REUSABLE = spill_module.reusable


def _cpu_counted(saver: Any, cpu: dict[str, float]) -> None:
    """Add to `cpu` the CPU seconds of the calling thread in the saver's put and put_writes, and
    in its list check (`_saver_prefix.reusable`, for one run: `_run_in` puts it back)."""

    lock = threading.Lock()

    def counted(fn: Callable[..., Any], key: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.thread_time() - t0
                with lock:
                    cpu[key] += spent

        return call

    saver.put, saver.put_writes = counted(saver.put, "calls"), counted(saver.put_writes, "calls")
    spill_module.reusable = counted(_REUSABLE, "list check")


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} KB"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def _exponent(b: dict[int, float], steps: int) -> float | None:
    lo = max(1, steps // 4)
    if lo not in b or steps not in b or lo == steps or not b[lo]:
        return None
    return math.log(b[steps] / b[lo]) / math.log(steps / lo)


def report(mode: str, steps: int, runs: dict[str, list[dict[str, Any]]], io_ms: list[float]) -> None:
    """Print one mode's table (medians over rounds) with ratios to SqliteSaver."""

    def med(name: str, key: str, mark: int | None = None) -> float | None:
        vals = [r[key] if mark is None else r[key].get(mark) for r in runs.get(name, [])]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    print(f"\n== mode: {mode} ({'DeltaChannel' if mode == 'delta' else 'plain add_messages'}), {steps} steps ==")
    marks = [m for m in MILESTONES if m <= steps]
    head = f"{'saver':<11}{'ms/step':>9}{'vs sqlite':>10}{'fsync/st':>9}{'growth^':>9}{'time^':>7}"
    head += "".join(f"{'bytes@' + str(m):>11}{'vs sqlite':>10}" for m in marks)
    head += "".join(f"{'get_state@' + str(m):>18}{'get_tuple@' + str(m):>15}" for m in marks)
    print(head)
    for name in runs:
        ms, sq_ms = med(name, "ms"), med("sqlite", "ms")
        by = {m: v for m in {max(1, steps // 4), steps} if (v := med(name, "bytes", m)) is not None}
        exp = _exponent(by, steps)
        fs = med(name, "fsync")
        row = f"{name:<11}{ms or 0:>9.2f}{_ratio(ms, sq_ms):>10}{(f'{fs:.2f}' if fs is not None else '-'):>9}"
        row += f"{(f'{exp:.2f}' if exp else '-'):>9}"
        tex = [e for r in runs[name] if (e := _exponent(r["elapsed"], steps)) is not None]
        row += f"{(f'{statistics.median(tex):.2f}' if tex else '-'):>7}"
        for m in marks:
            b = med(name, "bytes", m)
            row += f"{_fmt_bytes(b):>11}{_ratio(b, med('sqlite', 'bytes', m)):>10}"
        for m in marks:
            gs, gt = med(name, "get_state", m), med(name, "get_tuple", m)
            sgs = med("sqlite", "get_state", m)
            row += f"{(f'{gs:.2f}ms ' + _ratio(gs, sgs)) if gs is not None else '-':>18}"
            row += f"{(f'{gt:.2f}ms') if gt is not None else '-':>15}"
        print(row)
    floor_and_own_cost(runs)
    if io_ms:
        floor_report(runs, io_ms, steps, _exponent)


def floor_and_own_cost(runs: dict[str, list[dict[str, Any]]]) -> None:
    """Print the floor (no saver, InMemorySaver) against SqliteSaver, and each saver's own cost.

    A saver's own cost is its ms/step minus the no-saver ms/step of the same round (rounds are
    interleaved, so a round's figures share the machine's state); medians over rounds.
    """
    sq = [r["ms"] for r in runs.get("sqlite", [])]
    none = [r["ms"] for r in runs.get("none", [])]
    if not sq or not none:
        print("(floor and own cost need the savers 'none' and 'sqlite')")
        return
    sq_ms, none_ms = statistics.median(sq), statistics.median(none)
    floor = none_ms / sq_ms
    print(f"floor: no checkpointer {none_ms:.2f} ms/step = {floor:.2f}x SqliteSaver ({sq_ms:.2f} ms/step)", end="")
    if runs.get("memory"):
        mem_ms = statistics.median(r["ms"] for r in runs["memory"])
        print(f"; InMemorySaver {mem_ms:.2f} ms/step = {mem_ms / sq_ms:.2f}x", end="")
    print()
    if floor > 0.5:
        print(
            f"  the graph alone costs {floor:.2f}x SqliteSaver's ms/step (> 0.5x): NO saver can reach "
            "<= 0.5x SqliteSaver's ms/step on this workload; compare own costs below"
        )
    else:
        print(f"  a saver reaches 0.5x SqliteSaver if its own cost is <= {0.5 * sq_ms - none_ms:.2f} ms/step")

    def own(name: str) -> float:
        pairs = zip(runs[name], runs["none"], strict=False)
        return statistics.median(r["ms"] - n["ms"] for r, n in pairs)

    sq_own = own("sqlite")
    print(f"own cost (ms/step minus no-saver ms/step, same round): SqliteSaver {sq_own:.2f} ms/step")
    for name in runs:
        if name in ("none", "sqlite") or not runs[name]:
            continue
        mine = own(name)
        ratio = f"{mine / sq_own:.2f}x SqliteSaver's" if sq_own > 0 else "- (SqliteSaver's own cost <= 0)"
        print(f"  {name:<11}{mine:>8.2f} ms/step = {ratio}")


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the interleaved rounds, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plain-steps", type=int, default=200, help="steps in plain add_messages mode")
    ap.add_argument("--delta-steps", type=int, default=1000, help="steps in DeltaChannel mode")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds (medians are reported)")
    ap.add_argument("--savers", default=",".join(SAVERS), help="comma list of " + ",".join(SAVERS))
    ap.add_argument("--modes", default="delta,plain", help="comma list of delta,plain")
    policies = ["always", "checkpoint", "batch"]
    ap.add_argument("--jsonl-fsync", default="always", choices=policies, help="fsync policy of 'jsonl'")
    args = ap.parse_args(argv)
    JSONL_FSYNC["policy"] = args.jsonl_fsync
    names = [n for n in args.savers.split(",") if n]
    t_start = time.perf_counter()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for mode in args.modes.split(","):
        steps = args.delta_steps if mode == "delta" else args.plain_steps
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        ops: list = FLOOR_OPS
        ops.clear()
        if "jsonl" in names and "none" in names:  # an untimed run that records what the floor replays
            run_one("jsonl", mode, steps, ops)
            writes, size, syncs = summary(ops)
            print(f"  [{mode}] jsonl wrote {writes} times ({size / 1e6:.2f} MB) and synced {syncs} times")
        io_ms: list[float] = []
        for r in range(args.rounds):
            mine = [n for n in names if n != "floor" or ops]  # "floor" replays the trace
            order = mine[r % len(mine) :] + mine[: r % len(mine)]
            for name in order:
                t0 = time.perf_counter()
                runs[name].append(run_one(name, mode, steps))
                print(f"  [{mode} round {r + 1}] {name}: {time.perf_counter() - t0:.1f}s", flush=True)
            if ops:
                with tempfile.TemporaryDirectory(prefix="bench-floor-") as floor_dir:
                    io_ms.append(replay(ops, Path(floor_dir)) * 1000 / steps)
        report(mode, steps, runs, io_ms)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\ntotal {time.perf_counter() - t_start:.0f}s; load average at end: {load}")


if __name__ == "__main__":
    main()
