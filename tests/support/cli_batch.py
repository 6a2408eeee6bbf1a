"""Many `agentrt` commands in one process, each as the console script runs it.

`python -m tests.support.cli_batch` reads a JSON list of argument lists on stdin, calls the console
script's entry point (`agent.cli.main:main`) with each in turn and prints a JSON list of
`{"code", "out", "err"}`: the exit status, stdout and stderr a user of that command would see. One
start-up for a whole batch, so a test can ask every principal every read path in seconds; and since
one process then answers several tenants and users in turn, whatever a command leaves in memory
(caches, pools) must never serve another principal. `run_batch` starts it with this checkout's code,
or forks it from a fork server that imported it already (`tests.support.zygote`).
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.cli.console import Ran as Said  # what one command did (code, out, err)
from tests.cli.console import env

if TYPE_CHECKING:
    from tests.support.zygote import Zygote
COLLECT_EVERY = 8
"""Commands between two collections: each may leave a few database connections until then."""


def run_batch(commands: list[list[str]], cwd: Path, timeout: float = 300, zygote: Zygote | None = None) -> list[Said]:
    """Run `commands` (argument lists, without `agentrt`) in one new process, in order (forked
    from `zygote` when given)."""
    if zygote is None:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.support.cli_batch"],
            input=json.dumps(commands),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env(),
            timeout=timeout,
        )
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    else:
        listed = zygote.workdir / f"batch-{zygote.count + 1}.json"
        listed.write_text(json.dumps(commands), encoding="utf-8")
        done = zygote.run([str(listed)], env(), timeout, cwd, entry="tests.support.cli_batch:run_file")
        code, stdout, stderr = done.code, done.stdout, done.stderr
    assert code == 0, stderr
    said = [Said(**r) for r in json.loads(stdout)]
    assert len(said) == len(commands)
    return said


def _one(argv: list[str]) -> dict[str, object]:
    from agent.cli import common
    from agent.cli.main import main

    common.DONE_CODE = None
    # Text streams with a byte buffer beneath, as a process's own (`export` writes bytes).
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code if isinstance(exit_.code, int) else 2
    return {"code": code, "out": _text(out), "err": _text(err)}


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", errors="replace")


def run_file(argv: list[str]) -> int:
    """The batch as a fork server runs it: the commands in the JSON file `argv[0]`, their results as
    JSON on stdout."""
    _run_all(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    return 0


def _main() -> None:
    _run_all(json.loads(sys.stdin.read()))


def _run_all(commands: list[list[str]]) -> None:
    results = []
    for n, argv in enumerate(commands, 1):
        results.append(_one([str(a) for a in argv]))
        if n % COLLECT_EVERY == 0:
            # What the commands opened (each runner's SQL engine, lease connection, Redis clients)
            # goes as at a process's exit: `runner()` froze it for the garbage collector, which may
            # now free it again. Every few commands: a full collection costs a good part of one.
            gc.unfreeze()
            gc.collect()
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    _main()
