"""What the benchmarks that time the `agentrt` console script as fresh processes share: its path,
the `--runs` / `--pythonpath` options, byte-compiling the measured checkout, and the wall time of
one command.

The checkout is byte-compiled before anything is timed, as pip does when it installs a package:
with PYTHONDONTWRITEBYTECODE set (or a read-only checkout) no `.pyc` is ever written, so every
fresh process would compile each of agentrt's modules from source again, ~0.2 s of CPU that no
installed user pays, while the bare LangGraph anchor imports only installed, compiled packages."""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def add_options(parser: argparse.ArgumentParser) -> None:
    """`--runs N` (default 7) and `--pythonpath DIR` (the checkout to measure; default this one)."""
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pythonpath", default=str(ROOT), help="the checkout to measure (default: this one)")


PACKAGES = ("agent", "graph", "nodes", "checkpointing")


def byte_compile(checkout: str | Path) -> None:
    """Write the `.pyc` files of the checkout's packages (what `pip install` does for a user)."""
    dirs = [str(Path(checkout) / name) for name in PACKAGES if (Path(checkout) / name).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], check=True, stdout=subprocess.DEVNULL)


def agentrt() -> str:
    """The installed console script's path; exits 2 with what to do when it is not installed."""
    exe = shutil.which("agentrt")
    if exe is None:
        print("the agentrt console script is not installed (pip install -e '.[dev]')", file=sys.stderr)
        raise SystemExit(2)
    return exe


def wall_time(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds from starting `argv` in `cwd` to its exit (its output discarded)."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def wall_and_cpu(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Seconds of wall time and of CPU (user + system) of running `argv` in `cwd` to its exit. On a
    busy machine the CPU seconds are the steadier figure (the wall time waits for the cores too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = wall_time(argv, cwd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
