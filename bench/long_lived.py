"""Long-lived processes: 1,000 turns in one `agentrt serve` process and in one Celery worker process.

Each turn is the scripted model's short turn (plan, answer) on a session of its own, sent one
after another (`--sessions K`: the turns go round K sessions instead, so each session's history
grows). Printed for each process:

  - the cost of a turn over time: client wall ms and the process's CPU ms (user + system, read
    from /proc; the steadier figure on a busy machine) per turn, mean of the first and of the last
    100 turns, and their ratio (goal: the same cost, <= 1.1x);
  - resident memory (RSS from /proc) after the warm-up (`--warmup` turns) and at the end, and their
    ratio (goal <= 1.2x), with a sample every `--every` turns.

`serve`: `python -m agent.cli serve` on the embedded default (JSONL checkpoints with `fsync:
always`, the SQLite session table), each turn `POST /threads` then `POST /threads/{id}/runs/wait`.
`worker`: one `celery -A agent.worker worker --concurrency 1` (its pool process runs the turns;
memory and CPU are of the whole worker: main process and pool process), a Redis broker, the
production config with the files store and a PostgreSQL session table; each turn `agentrt
submit`'s path (`submit_turn`) and waits for it.

    python bench/long_lived.py                     # both, 1,000 turns each (about 10-20 minutes)
    python bench/long_lived.py --only serve --turns 300
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from serve import server, write_config  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def tree(root: int) -> list[int]:
    """`root` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_s(root: int) -> float:
    """CPU seconds (user + system) spent so far by `root` and its living descendants."""
    total = 0
    for pid in tree(root):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def rss_mib(root: int) -> float:
    """Resident memory of `root` and its descendants, MiB."""
    kib = 0
    for pid in tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        kib += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return kib / 1024


def drive(label: str, pid: int, turn: Callable[[int], None], args: argparse.Namespace) -> dict[str, float]:
    """Run `args.turns` turns through `turn(i)`, measuring process `pid`; print and return the figures."""
    wall: list[float] = []
    cpu: list[float] = []
    rss: dict[int, float] = {0: rss_mib(pid)}
    for i in range(args.turns):
        c0, t0 = cpu_s(pid), time.perf_counter()
        turn(i)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((cpu_s(pid) - c0) * 1000)
        done = i + 1
        if done == args.warmup or done % args.every == 0 or done == args.turns:
            rss[done] = rss_mib(pid)
            last = wall[-args.every :]
            print(
                f"  {label} turn {done:5}: RSS {rss[done]:6.1f} MiB, last {len(last)} turns "
                f"{statistics.mean(last):6.1f} ms wall, {statistics.mean(cpu[-args.every :]):6.1f} CPU ms",
                flush=True,
            )
    return report(label, wall, cpu, rss, args)


def report(
    label: str, wall: list[float], cpu: list[float], rss: dict[int, float], args: argparse.Namespace
) -> dict[str, float]:
    """Print first vs last 100 turns and RSS after warm-up vs end (see the module doc)."""
    k = min(100, len(wall) // 2)
    out = {
        "wall_first": statistics.mean(wall[:k]),
        "wall_last": statistics.mean(wall[-k:]),
        "cpu_first": statistics.mean(cpu[:k]),
        "cpu_last": statistics.mean(cpu[-k:]),
        "rss_start": rss[0],
        "rss_warm": rss[args.warmup],
        "rss_end": rss[args.turns],
    }
    print(f"\n== {label}: {args.turns} turns in one process")
    print(
        f"per turn, first {k} vs last {k}: wall {out['wall_first']:.1f} -> {out['wall_last']:.1f} ms "
        f"({out['wall_last'] / out['wall_first']:.2f}x), CPU {out['cpu_first']:.1f} -> {out['cpu_last']:.1f} ms "
        f"({out['cpu_last'] / out['cpu_first']:.2f}x; goal <= 1.1x)"
    )
    print(
        f"RSS: {out['rss_start']:.1f} MiB at start, {out['rss_warm']:.1f} after {args.warmup} turns, "
        f"{out['rss_end']:.1f} at the end: {out['rss_end'] / out['rss_warm']:.2f}x after warm-up (goal <= 1.2x)"
    )
    return out


def bench_serve(args: argparse.Namespace, tmp: Path) -> None:
    """1,000 turns through `agentrt serve`'s HTTP API."""
    config = write_config(tmp)
    with server("agentrt", tmp, config) as (url, pid), httpx.Client(base_url=url, timeout=120) as http:
        threads: list[str] = []

        def turn(i: int) -> None:
            if args.sessions == 0 or len(threads) < args.sessions:
                r = http.post("/threads", json={})
                r.raise_for_status()
                threads.append(str(r.json()["thread_id"]))
            tid = threads[-1] if args.sessions == 0 else threads[i % args.sessions]
            body = {"assistant_id": "agentrt", "input": {"user_input": f"turn {i}"}}
            r = http.post(f"/threads/{tid}/runs/wait", json=body)
            r.raise_for_status()

        drive("agentrt serve", pid, turn, args)


def bench_worker(args: argparse.Namespace, tmp: Path) -> None:
    """1,000 turns through one Celery worker process (`--concurrency 1`)."""
    from workers import _wait_ready

    from tests.support.celery_drill import open_cluster, turn_script

    c = open_cluster(tmp, "redis", turn_script(args.turns, ()), visibility_timeout_s=3600, store=args.store)
    try:
        proc = c.start_worker("long0", concurrency=1, hooks=False)
        _wait_ready(c, ["long0"])

        def turn(i: int) -> None:
            sid = f"s{i:05d}" if args.sessions == 0 else f"s{i % args.sessions:05d}"
            done = c.submit(sid, f"Turn {i}.").wait(timeout=300)
            if done.status.value != "COMPLETED":
                raise SystemExit(f"turn {i} ended {done.status.value}:\n{c.log_tail()}")

        drive(f"celery worker ({args.store} store)", proc.pid, turn, args)
    finally:
        c.close()


def main() -> None:
    """Parse, run the chosen processes, print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=100, help="turns before the reference RSS")
    p.add_argument("--every", type=int, default=100, help="print a sample every this many turns")
    p.add_argument("--sessions", type=int, default=0, help="round K sessions (0: a new session per turn)")
    p.add_argument("--only", default="serve,worker", help="comma list of serve,worker")
    p.add_argument("--store", choices=["files", "postgres"], default="files", help="the worker's record store")
    args = p.parse_args()
    print(f"cores: {os.cpu_count()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="agentrt-bench-long-") as root:
        for kind in args.only.split(","):
            tmp = Path(root) / kind
            tmp.mkdir()
            {"serve": bench_serve, "worker": bench_worker}[kind](args, tmp)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
