"""The figures `bench/runtime.py` prints for its runs: the per-N table, flatness, growth, fsyncs, memory."""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path
from typing import Any

KINDS = ("checkpoints", "events", "journal", "chat SQLite", "blobs", "other")


def _mean(xs: list[float]) -> float:
    return statistics.mean(xs) if xs else float("nan")


def _kind(rel: Path) -> str:
    """Which part of agentrt's storage a file under base_dir is (for the bytes breakdown)."""
    from agent.session.stores.sql_lazy import SQLITE_FILE
    from checkpointing import layout

    name = rel.name
    if layout.RUNS in rel.parts:
        return "checkpoints"
    if name.startswith(layout.EVENTS_FILE):
        return "events"
    if name.startswith(layout.JOURNAL_FILE):
        return "journal"
    if name.startswith(SQLITE_FILE):
        return "chat SQLite"
    if layout.BLOBS[0] in rel.parts:
        return "blobs"
    return "other"  # session.json, fence/lease files, outbox, inbox


def bytes_by_kind(root: Path) -> dict[str, int]:
    """Bytes under agentrt's base_dir by kind of storage (`KINDS`)."""
    out = dict.fromkeys(KINDS, 0)
    for p in root.rglob("*") if root.exists() else ():
        if p.is_file():
            out[_kind(p.relative_to(root))] += p.stat().st_size
    return out


def parse_strace(text: str) -> dict[str, int]:
    """The call counts of `strace -c` output for fsync, fdatasync, write and openat."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[-1] in ("fsync", "fdatasync", "write", "openat") and parts[3].isdigit():
            counts[parts[-1]] = int(parts[3])
    return counts


def own_lines(args: argparse.Namespace, med: Any) -> None:
    """Each side's own cost, wall and CPU: its figure minus the bare loop with no checkpointer
    (agentrt makes the same two supersteps per tool step as the bare loop)."""
    for key, what in (("steps", "wall"), ("cpu_ms", "CPU")):
        floor = {n: med("bare-none", n, key) for n in args.steps}
        for kind in ("agentrt", "bare-sqlite", "bare-jsonl"):
            print(
                f"{what + ' ' + kind + ' own':30}"
                + "".join(f"{med(kind, n, key) - floor[n]:>14.2f}" for n in args.steps)
                + "   ms/step beyond the bare loop with no checkpointer"
            )
        for anchor in ("bare-sqlite", "bare-jsonl"):
            print(
                f"{what + ' own agentrt/' + anchor:30}"
                + "".join(
                    f"{(med('agentrt', n, key) - floor[n]) / (med(anchor, n, key) - floor[n]):>13.2f}x"
                    for n in args.steps
                )
                + "   (agentrt's own cost over the anchor's own)"
            )


def flatness(res: dict[tuple[str, int], list[dict[str, Any]]], kind: str, n: int, key: str, what: str) -> None:
    """Steps 150-200 (N >= 200) and the last 50 steps (N > 100) against the first 50, wall time
    (`steps`) or CPU (`cpu_steps`): each round's ratio, then the median over rounds (a single round
    swings with the machine)."""
    rounds = [d[key] for d in res.get((kind, n), ()) if d.get(key)]
    if not rounds or n <= 100:
        return
    first = statistics.median(_mean(s[:50]) for s in rounds)
    if n >= 200:
        late = statistics.median(_mean(s[149:200]) for s in rounds)
        ratio = statistics.median(_mean(s[149:200]) / _mean(s[:50]) for s in rounds)
        print(
            f"flatness{what} {kind} N={n}: steps 150-200 {late:.2f} ms vs 1-50 {first:.2f} ms = "
            f"{ratio:.2f}x (median of {len(rounds)} rounds)"
        )
    last = statistics.median(_mean(s[-50:]) for s in rounds)
    ratio = statistics.median(_mean(s[-50:]) / _mean(s[:50]) for s in rounds)
    print(
        f"flatness{what} {kind} N={n}: last 50 steps {last:.2f} ms vs first 50 {first:.2f} ms = "
        f"{ratio:.2f}x (median of {len(rounds)} rounds; goal <= 1.1x)"
    )


def report(args: argparse.Namespace, res: dict[tuple[str, int], list[dict[str, Any]]]) -> None:
    """Print the per-N table, flatness and growth."""

    def med(kind: str, n: int, key: str) -> float:
        vals = [d[key] if key != "steps" else _mean(d["steps"]) for d in res.get((kind, n), ())]
        return statistics.median(vals) if vals else float("nan")

    print("\n== one turn of N tool steps (median of rounds)")
    print(f"{'':30}" + "".join(f"{'N=' + str(n):>14}" for n in args.steps))
    rows = [
        ("agentrt ms/tool step", "agentrt", "steps", 1.0, "{:.2f}"),
        ("bare+SqliteSaver ms/tool step", "bare-sqlite", "steps", 1.0, "{:.2f}"),
        ("bare+JSONL saver ms/tool step", "bare-jsonl", "steps", 1.0, "{:.2f}"),
        ("floor: bare+InMemorySaver", "bare-memory", "steps", 1.0, "{:.2f}"),
        ("floor: bare, no checkpointer", "bare-none", "steps", 1.0, "{:.2f}"),
        ("agentrt CPU ms/tool step", "agentrt", "cpu_ms", 1.0, "{:.2f}"),
        ("bare+SqliteSaver CPU ms/step", "bare-sqlite", "cpu_ms", 1.0, "{:.2f}"),
        ("bare+JSONL saver CPU ms/step", "bare-jsonl", "cpu_ms", 1.0, "{:.2f}"),
        ("floor: InMemorySaver CPU ms/step", "bare-memory", "cpu_ms", 1.0, "{:.2f}"),
        ("floor: no ckpt CPU ms/step", "bare-none", "cpu_ms", 1.0, "{:.2f}"),
        ("agentrt bytes (MB)", "agentrt", "bytes", 1e6, "{:.2f}"),
        ("bare+SqliteSaver bytes (MB)", "bare-sqlite", "bytes", 1e6, "{:.2f}"),
        ("bare+JSONL saver bytes (MB)", "bare-jsonl", "bytes", 1e6, "{:.2f}"),
        ("agentrt peak RSS (MB)", "agentrt", "rss_mb", 1.0, "{:.0f}"),
        ("bare+SqliteSaver peak RSS (MB)", "bare-sqlite", "rss_mb", 1.0, "{:.0f}"),
        ("bare+JSONL saver peak RSS (MB)", "bare-jsonl", "rss_mb", 1.0, "{:.0f}"),
        ("floor: no ckpt peak RSS (MB)", "bare-none", "rss_mb", 1.0, "{:.0f}"),
    ]
    for label, kind, key, div, fmt in rows:
        print(f"{label:30}" + "".join(f"{fmt.format(med(kind, n, key) / div):>14}" for n in args.steps))
    ratios = [  # (label, kind, anchor, key, note): kind / anchor per N
        ("ratio agentrt/bare sqlite", "agentrt", "bare-sqlite", "steps", "   (goal <= 1.0x at N=50, 200)"),
        ("ratio agentrt/bare JSONL", "agentrt", "bare-jsonl", "steps", "   (goal <= 1.2x at N=1,000)"),
        (
            "CPU ratio agentrt/bare sqlite",
            "agentrt",
            "bare-sqlite",
            "cpu_ms",
            "   (CPU of all threads per tool step; steadier on a busy machine)",
        ),
        ("CPU ratio agentrt/bare JSONL", "agentrt", "bare-jsonl", "cpu_ms", ""),
        ("ratio bare-memory/bare sqlite", "bare-memory", "bare-sqlite", "steps", "   (floor)"),
        ("ratio bare-none/bare sqlite", "bare-none", "bare-sqlite", "steps", "   (floor)"),
    ]

    def ratio_line(label: str, kind: str, anchor: str, key: str, note: str) -> None:
        print(f"{label:30}" + "".join(f"{med(kind, n, key) / med(anchor, n, key):>13.2f}x" for n in args.steps) + note)

    for label, kind, anchor, key, note in ratios:
        ratio_line(label, kind, anchor, key, note)
    owns = (("agentrt own: minus no-ckpt floor", "agentrt"), ("bare sqlite own: minus floor", "bare-sqlite"))
    for label, kind in owns:
        own = [med(kind, n, "steps") - med("bare-none", n, "steps") for n in args.steps]
        print(f"{label:30}" + "".join(f"{v:>14.2f}" for v in own) + "   ms/step")
    own_lines(args, med)
    memory = [
        ("ratio bytes agentrt/JSONL alone", "bare-jsonl", "bytes", "   (goal <= 3x)"),
        ("agentrt/bare sqlite peak RSS", "bare-sqlite", "rss_mb", "   (goal <= 1.2x at N=1,000; VmHWM of each child)"),
        ("agentrt/bare JSONL peak RSS", "bare-jsonl", "rss_mb", ""),
    ]
    for label, anchor, key, note in memory:
        ratio_line(label, "agentrt", anchor, key, note)
    for kind_name in res[("agentrt", args.steps[0])][0]["by_kind"]:  # in the order of runtime.KINDS
        vals = [statistics.median(d["by_kind"][kind_name] for d in res[("agentrt", n)]) / 1e6 for n in args.steps]
        print(f"{'  agentrt ' + kind_name + ' (MB)':30}" + "".join(f"{v:>14.2f}" for v in vals))
    for kind in ("agentrt", "bare-sqlite", "bare-jsonl"):
        fs = [statistics.median(d["fsyncs"] for d in res[(kind, n)]) / n for n in args.steps]
        print(f"{kind + ' fsyncs/tool step':30}" + "".join(f"{f:>14.1f}" for f in fs) + "   (python-level)")
    if len(args.steps) > 1:
        # The claim "2 fsyncs per tool step" measured: the slope between the smallest and largest N,
        # and what is left at N=0 (the turn's own: lease, fence, session document, run entries).
        lo, hi = min(args.steps), max(args.steps)
        for kind in ("agentrt", "bare-jsonl"):
            f_lo = statistics.median(d["fsyncs"] for d in res[(kind, lo)])
            f_hi = statistics.median(d["fsyncs"] for d in res[(kind, hi)])
            marginal = (f_hi - f_lo) / (hi - lo)
            goal = "   (goal <= 2)" if kind == "agentrt" else ""
            print(
                f"{kind + ' marginal fsyncs/step':30}{marginal:>14.2f}   N={lo}..{hi}{goal}; "
                f"per-turn constant {f_lo - marginal * lo:.1f}"
            )
    if args.strace:
        for kind in ("agentrt", "bare-sqlite", "bare-jsonl"):
            for call in ("fsync", "fdatasync", "write", "openat"):
                vals = [res[(kind, n)][0].get("strace", {}).get(call, 0) / n for n in args.steps]
                print(f"{kind + ' strace ' + call + '/step':30}" + "".join(f"{v:>14.1f}" for v in vals))
    for n in args.steps:
        for kind in ("agentrt", "bare-sqlite", "bare-jsonl", "bare-none"):
            for key, what in (("steps", ""), ("cpu_steps", " CPU")):
                flatness(res, kind, n, key, what)
    if len(args.steps) > 1:
        lo, hi = min(args.steps), max(args.steps)
        for kind in ("agentrt", "bare-sqlite", "bare-jsonl"):
            b_lo, b_hi = med(kind, lo, "bytes"), med(kind, hi, "bytes")
            exp = math.log(b_hi / b_lo) / math.log(hi / lo)
            print(f"growth exponent {kind} N={lo}..{hi}: {exp:.2f}" + (" (goal <= 1.1)" if kind == "agentrt" else ""))
