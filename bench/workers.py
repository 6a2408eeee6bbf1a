"""Celery workers: turns per minute with 1, 2 and 4 worker processes, and submit-to-first-node latency.

    python bench/workers.py [--broker redis|rabbitmq|both] [--store files|postgres|both]
                            [--sessions 20] [--turns 2] [--samples 40]

Each turn is the scripted model (plan, one tool call, answer) with a tool that sleeps 200 ms, so
the figure measures scheduling and persistence (fsync'd event log, checkpoints, journal, the
PostgreSQL projection, Redis leases), not model time. N worker processes = N `celery worker`
instances with `--concurrency 1`. Throughput: all turns submitted at once (sessions x turns, the
turns of a session in order), timed from the first submit to the last turn settled. Latency: with
idle workers, one turn at a time on a fresh session, from the inbox's `submitted` record to the
run's `run_start` entry (written just before the graph's first node starts).

Stores: `files` is one machine's fleet (every worker on one shared base_dir, the lease in Redis);
`postgres` a fleet with no shared files (each worker on its own base_dir, every record, the lease
and the fence in PostgreSQL). Both on this machine: the core count is printed first, since on a
machine with fewer cores than workers the figures show each store's overhead, not scaling.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.runner import AgentRunner
from tests.support.celery_drill import Cluster, open_cluster, turn_script, wait_all


def _wait_ready(c: Cluster, names: list[str], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    for name in names:
        log = c.tmp / f"{name}.log"
        while not (log.exists() and " ready." in log.read_text(errors="replace")):
            if time.monotonic() > deadline:
                raise SystemExit(f"worker {name} did not start:\n{c.log_tail()}")
            time.sleep(0.2)


def throughput(broker: str, procs: int, sessions: int, turns: int, tmp: Path, store: str = "files") -> float:
    """Turns per minute with `procs` single-process workers."""
    c = open_cluster(tmp, broker, turn_script(turns, ("nap",)), visibility_timeout_s=3600, store=store)
    try:
        names = [f"b{i}" for i in range(procs)]
        for name in names:
            c.start_worker(name, concurrency=1, hooks=False)
        _wait_ready(c, names)
        t0 = time.monotonic()
        handles = [c.submit(f"s{i:03d}", f"Turn {n} of session {i}.") for n in range(turns) for i in range(sessions)]
        done = wait_all(handles, timeout=900)
        elapsed = time.monotonic() - t0
        bad = [t.to_json() for t in done if t.status.value != "COMPLETED"]
        if bad:
            raise SystemExit(f"turns failed: {bad[:3]}")
        return len(done) / elapsed * 60
    finally:
        c.close()


def latency(broker: str, samples: int, tmp: Path, store: str = "files") -> tuple[float, float]:
    """p50 and p99 milliseconds from submit to the first node starting, idle workers (2 processes)."""
    c = open_cluster(tmp, broker, turn_script(1, ("nap",)), visibility_timeout_s=3600, store=store)
    try:
        names = ["l0", "l1"]
        for name in names:
            c.start_worker(name, concurrency=1, hooks=False)
        _wait_ready(c, names)
        runner = AgentRunner.from_config(c.config)
        out = []
        for i in range(samples):
            sid = f"lat{i:03d}"
            c.submit(sid, "One turn.").wait(timeout=120)
            submitted = next(r["ts"] for r in c.inbox(sid).records() if r["kind"] == "submitted")
            entries = runner.manager.event_log(c.tenant, sid).entries()
            started = next(datetime.fromisoformat(e.ts).timestamp() for e in entries if e.type == "run_start")
            out.append((started - float(submitted)) * 1000)
        out.sort()
        return statistics.median(out), out[min(len(out) - 1, round(0.99 * (len(out) - 1)))]
    finally:
        c.close()


def main() -> None:
    """Print the figures for each broker."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--broker", choices=["redis", "rabbitmq", "both"], default="both")
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--turns", type=int, default=2, help="turns per session")
    p.add_argument("--procs", default="1,2,4", help='worker process counts ("" for the latency only)')
    p.add_argument("--samples", type=int, default=40, help="latency samples")
    p.add_argument("--store", choices=["files", "postgres", "both"], default="both")
    args = p.parse_args()
    brokers = ["redis", "rabbitmq"] if args.broker == "both" else [args.broker]
    stores = ["files", "postgres"] if args.store == "both" else [args.store]
    print(f"cores: {os.cpu_count()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="agentrt-bench-workers-") as root:
        for broker in brokers:
            for store in stores:
                label = f"{broker:8s} {store:8s}"
                for n in (int(x) for x in args.procs.split(",") if x):
                    tmp = Path(root) / f"{broker}-{store}-{n}"
                    tmp.mkdir()
                    tpm = throughput(broker, n, args.sessions, args.turns, tmp, store)
                    print(f"{label} {n} worker process(es): {tpm:6.1f} turns/min", flush=True)
                tmp = Path(root) / f"{broker}-{store}-latency"
                tmp.mkdir()
                p50, p99 = latency(broker, args.samples, tmp, store)
                print(f"{label} submit -> first node: p50 {p50:6.1f} ms, p99 {p99:6.1f} ms", flush=True)


if __name__ == "__main__":
    main()
