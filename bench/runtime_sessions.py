"""The session-command figures of `bench/runtime.py`: next turn / show / doctor / resume of a 20-step
session against the largest one, in process and as CLI processes."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().with_name("runtime.py")
CODE = SCRIPT.parents[1]
"""The checkout whose `agent` the children import (`bench/runtime.py --code` sets it)."""
NEXT_TURN = "And one more thing?"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(CODE) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _cli(work: Path, *args: str) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "agent.cli", *args], env=_env(), capture_output=True, text=True, check=False, cwd=work
    )
    wall = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise SystemExit(f"agentrt {' '.join(args)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return wall


def _in_process(work: Path) -> dict[str, float]:
    cmd = [sys.executable, str(SCRIPT), "--child", "commands", "--dir", str(work), "--n", "0"]
    cmd += ["--code", str(CODE)]
    out = subprocess.run(cmd, env=_env(), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"commands child failed:\n{out.stderr[-3000:]}")
    data: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def session_commands(work: Path) -> dict[str, float]:
    """Wall seconds of show / doctor / resume (finished run) / next turn on the session under `work`."""
    cfg = str(work / "config.yaml")
    return {
        "show": _cli(work, "show", "s-bench", "--config", cfg, "--json"),
        "doctor": _cli(work, "doctor", "s-bench", "--config", cfg, "--json"),
        "resume": _cli(work, "resume", "s-bench", "--config", cfg, "--json"),
        "next_turn": _cli(work, "run", "--session", "s-bench", "--config", cfg, "--json", NEXT_TURN),
    }


def sessions(args: argparse.Namespace, top: Path, run_child: Callable[[str, Path, int], dict[str, Any]]) -> None:
    """Time the session commands on a 20-step session and on the largest one."""
    small_work = top / "agentrt-20-s"
    run_child("agentrt", small_work, 20)
    _session_figures(top, small_work, top / f"agentrt-{max(args.steps)}-0", max(args.steps))


def sessions_on(top: Path, small: Path, large: Path) -> None:
    """The session figures on copies of two existing bench sessions (`--on SMALL LARGE`)."""
    works = []
    for src in (small, large):
        dst = top / src.name
        shutil.copytree(src, dst)
        cfg = dst / "config.yaml"
        cfg.write_text(cfg.read_text().replace(str(src), str(dst)))
        works.append(dst)
    _session_figures(top, works[0], works[1], (large / "script.yaml").read_text().count('"blob2k"'))


def _wall(*argv: str) -> float:
    """Best of three walls of a fresh `python argv...` (process start is the noisiest figure)."""
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *argv], env=_env(), capture_output=True, check=False)
        walls.append(time.perf_counter() - t0)
    return min(walls)


def _session_figures(top: Path, small_work: Path, big_work: Path, big: int) -> None:
    start = _wall("-m", "agent.cli", "--help")
    floor = _wall("-c", "import langgraph.graph")
    # In-process first (each command's own work), on copies: the CLI round then runs on the originals.
    copies = []
    for src in (small_work, big_work):
        dst = src.with_name(src.name + "-copy")
        shutil.copytree(src, dst)
        cfg = dst / "config.yaml"
        cfg.write_text(cfg.read_text().replace(str(src), str(dst)))
        copies.append(dst)
    small_in = _in_process(copies[0])
    large_in = _in_process(copies[1])
    print(f"\n== session commands, in process (s of work, runner already built; code: {CODE})")
    print(f"{'':12}{'20 steps':>10}{f'{big} steps':>12}{'ratio':>8}")
    for k in small_in:
        print(f"{k:12}{small_in[k]:>10.3f}{large_in[k]:>12.3f}{large_in[k] / small_in[k]:>7.2f}x   (goal <= 2x, < 1 s)")
    small = session_commands(small_work)
    large = session_commands(big_work)
    print(
        f"\n== session commands (wall s; `agentrt --help` = {start:.2f} s process start; "
        f"`python -c 'import langgraph.graph'` = {floor:.2f} s, the floor of any LangGraph program)"
    )
    print(f"{'':12}{'20 steps':>10}{f'{big} steps':>12}{'ratio':>8}{'- --help':>10}{'- langgraph':>13}")
    for k in small:
        print(
            f"{k:12}{small[k]:>10.2f}{large[k]:>12.2f}{large[k] / small[k]:>7.2f}x{large[k] - start:>9.2f}s"
            f"{large[k] - floor:>12.2f}s   (goal <= 2x and < 1 s beyond start)"
        )
