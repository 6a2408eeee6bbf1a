"""Startup time of the `agentrt` console script: `--help`, `--version` and `sessions`.

Targets: `agentrt --help` under 0.3 s, `agentrt sessions` under 0.6 s on this machine.
Each command runs N times in a fresh process from a temporary directory holding a few sessions;
prints the best and the median wall time. The machine is shared, so the best run is the figure
to compare; `--pythonpath DIR` measures another checkout (e.g. the main branch, for "before").

    python bench/startup.py [--runs 7] [--pythonpath DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cli_timing import add_options, agentrt, byte_compile, wall_time

COMMANDS = (["--help"], ["--version"], ["sessions"])
TARGETS = {"--help": 0.3, "sessions": 0.6}


def main() -> int:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser)
    args = parser.parse_args()
    byte_compile(args.pythonpath)
    exe = agentrt()
    env = {**os.environ, "PYTHONPATH": args.pythonpath}
    env.pop("AGENTRT_LOG", None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(3):  # a few sessions for `sessions` to list
            subprocess.run(
                [exe, "run", "--json", "--approve-all", f"turn {i}"], cwd=work, env=env, capture_output=True, check=True
            )
        print(f"agentrt startup, {args.runs} runs each, checkout {args.pythonpath}")
        print(f"{'command':<24} {'best s':>8} {'median s':>9} {'target s':>9}")
        for cmd in COMMANDS:
            wall_time([exe, *cmd], work, env)  # warm the file cache
            times = [wall_time([exe, *cmd], work, env) for _ in range(args.runs)]
            target = TARGETS.get(cmd[0])
            shown = f"{target:>9.1f}" if target else f"{'-':>9}"
            print(f"{'agentrt ' + ' '.join(cmd):<24} {min(times):>8.3f} {statistics.median(times):>9.3f} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
