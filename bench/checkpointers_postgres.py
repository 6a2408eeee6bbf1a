"""Benchmark: JsonlCheckpointSaver over the PostgreSQL store against LangGraph's PostgresSaver.

The workload and measurements are `bench/checkpointers.py`'s (an agent loop, one AI message with a
tool call and one 2 KB tool result per step, every tenth result 50 KB; plain `add_messages` or
`DeltaChannel`), on the same local PostgreSQL database, each saver in a schema of its own dropped
at the end. Printed per mode: ms/step, bytes in PostgreSQL (`pg_total_relation_size` of the
schema's tables: heap, TOAST and indexes) and the latency of `get_state` / `get_tuple` of the
latest checkpoint after 100 and 1,000 steps, each also as a ratio to PostgresSaver. Nothing is
asserted.

    python bench/checkpointers_postgres.py                  # delta 1000 steps, plain 200 steps
    python bench/checkpointers_postgres.py --rounds 3 --modes delta

Savers: "jsonl-pg" (fsync "always": every put and put_writes commits synchronously), "jsonl-pg-ckpt"
(fsync "checkpoint": pending writes commit without waiting for the WAL flush, the superstep's
checkpoint flushes them: one WAL flush per superstep), "postgres" (PostgresSaver, autocommit: every
statement commits synchronously). AGENTRT_DATABASE_URL picks the server (default
postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import checkpointers as base

from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.store.postgres import PostgresStore

SAVERS = ("jsonl-pg", "jsonl-pg-ckpt", "postgres")
URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
_stock_make_saver = base.make_saver


def make_saver(name: str, work: Path) -> tuple[Any, Callable[[], int | None], Callable[[], None]]:
    """(saver, bytes-stored function, close function); the JSONL saver over PostgreSQL here, the
    others as `bench/checkpointers.py` makes them."""
    if name not in ("jsonl-pg", "jsonl-pg-ckpt"):
        return _stock_make_saver(name, work)
    store = PostgresStore(URL, schema=f"bench_{uuid.uuid4().hex[:12]}")
    store.setup()
    saver = JsonlCheckpointSaver(store=store, fsync="always" if name == "jsonl-pg" else "checkpoint")

    def size() -> int:
        with store.connection("measuring") as conn:
            row = conn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(format('%%I.%%I', schemaname, tablename))), 0) "
                "FROM pg_tables WHERE schemaname = %s",
                (store.schema,),
            ).fetchone()
        return int(row[0]) if row else 0

    def close() -> None:
        with store.connection("dropping the bench schema") as conn:
            conn.execute(f'DROP SCHEMA "{store.schema}" CASCADE')
        store.close()

    return saver, size, close


def report(mode: str, steps: int, runs: dict[str, list[dict[str, Any]]]) -> None:
    """One mode's table: medians over rounds, ratios to PostgresSaver."""

    def med(name: str, key: str, mark: int | None = None) -> float | None:
        vals = [r[key] if mark is None else r[key].get(mark) for r in runs.get(name, [])]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    marks = [m for m in base.MILESTONES if m <= steps]
    print(f"\n== mode: {mode}, {steps} steps (ratios: to PostgresSaver) ==")
    head = f"{'saver':<14}{'ms/step':>9}{'ratio':>7}"
    head += "".join(f"{'bytes@' + str(m):>12}{'ratio':>7}" for m in marks)
    head += "".join(f"{'get_state@' + str(m):>16}{'ratio':>7}{'get_tuple@' + str(m):>16}" for m in marks)
    print(head)
    for name in runs:
        ms = med(name, "ms")
        row = f"{name:<14}{ms or 0:>9.2f}{base._ratio(ms, med('postgres', 'ms')):>7}"
        for m in marks:
            b = med(name, "bytes", m)
            row += f"{base._fmt_bytes(b):>12}{base._ratio(b, med('postgres', 'bytes', m)):>7}"
        for m in marks:
            gs, gt = med(name, "get_state", m), med(name, "get_tuple", m)
            shown = f"{gs:.2f}ms" if gs is not None else "-"
            row += f"{shown:>16}{base._ratio(gs, med('postgres', 'get_state', m)):>7}"
            row += f"{(f'{gt:.2f}ms' if gt is not None else '-'):>16}"
        print(row)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run interleaved rounds, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plain-steps", type=int, default=200, help="steps in plain add_messages mode")
    ap.add_argument("--delta-steps", type=int, default=1000, help="steps in DeltaChannel mode")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds (medians are reported)")
    ap.add_argument("--savers", default=",".join(SAVERS), help="comma list of " + ",".join(SAVERS))
    ap.add_argument("--modes", default="delta,plain", help="comma list of delta,plain")
    args = ap.parse_args(argv)
    base.make_saver = make_saver  # run_one makes its savers through the module's make_saver
    names = [n for n in args.savers.split(",") if n]
    t_start = time.perf_counter()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for mode in args.modes.split(","):
        steps = args.delta_steps if mode == "delta" else args.plain_steps
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                t0 = time.perf_counter()
                runs[name].append(base.run_one(name, mode, steps))
                print(f"  [{mode} round {r + 1}] {name}: {time.perf_counter() - t0:.1f}s", flush=True)
        report(mode, steps, runs)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\ntotal {time.perf_counter() - t_start:.0f}s; load average at end: {load}")


if __name__ == "__main__":
    main()
