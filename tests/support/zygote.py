"""A fork server: `agentrt` processes without paying the import time each time.

The server is a real child interpreter that imports the runtime once and then, per request,
forks a process that runs `agent.cli.main(argv)` with its own environment and stdout/stderr
files. A crash drill kills that forked process with a real SIGKILL at a random instant of its run,
which a fresh `python -m agent.cli` would spend mostly importing; a test of many short commands
(each its own process, as a user's shell runs them) saves seconds a command. Nothing is shared
between runs: the server only imports modules (`preload`: more of them, such as the layers' clients
`LAYERS` names), never builds a runner (no threads, no open files, no lease), each fork starts clean.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.shell_env import environ_copy

ROOT = Path(__file__).resolve().parents[2]
LAYERS = (
    "agent.cli.common",
    "agent.cli.manage",
    "agent.cli.run",
    "agent.doctor.report",
    "agent.runner.submit",
    "agent.session.db_cli",
    "agent.session.lease_postgres",
    "agent.session.lease_redis",
    "agent.session.stores.redis",
    "agent.session.stores.sql",
    "agent.session.sweep",
    "agent.tools.dataset_tools",
    "checkpointing.saver",
    "checkpointing.store.postgres",
    "psycopg_pool",
)
"""What the commands of a production.yaml-like config import besides the runtime: the session
layers' clients (SQLAlchemy, psycopg, redis-py), the doctor, the Celery producer, the saver."""


def serve(preload: tuple[str, ...] = ()) -> None:
    """Server loop (runs in the child interpreter): one JSON request a line, two JSON replies."""
    import importlib

    import agent.cli
    import agent.runner.agent_runner
    import tests.support.drill_tools  # noqa: F401

    for name in preload:
        importlib.import_module(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            entry = req.get("entry")
            if entry:  # another entry point taking argv, e.g. a batch of commands
                module, _, name = entry.partition(":")
                _child(req, getattr(importlib.import_module(module), name))
            _child(req, agent.cli.main)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"pid": pid, "code": code}), flush=True)


def _child(req: dict[str, Any], main: Any) -> None:
    code = 1
    try:
        os.environ.clear()
        os.environ.update(req["env"])
        if req.get("cwd"):
            os.chdir(req["cwd"])  # a run on the embedded default config keeps ./.agentrt here
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        code = int(main(req["argv"]))
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@dataclass
class Outcome:
    """How one forked `agentrt` process ended."""

    code: int  # exit status, or -signal number when killed
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        """The `--json` object the command printed."""
        out: dict[str, Any] = json.loads(self.stdout)
        return out


class Zygote:
    """Client of the fork server; use as a context manager."""

    def __init__(self, workdir: Path, preload: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        env = {k: v for k, v in environ_copy().items() if not k.startswith("AGENTRT_")}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from tests.support.zygote import serve; serve({tuple(preload)!r})"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
            env=env,
        )
        assert self._read().get("ready"), "fork server did not start"
        self.count = 0
        self._unwaited: int | None = None
        """The spawned process nobody waited for yet (the server serves the next one after it)."""

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server (a spawned process nobody waited for is killed first)."""
        self._reap()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the fork server died")
        out: dict[str, Any] = json.loads(line)
        return out

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path | None = None, entry: str | None = None) -> int:
        """Fork an `agentrt ARGV` process (in `cwd`, default the repository); returns its pid
        (call `wait` next)."""
        self._reap()
        self.count += 1
        out, err = self.workdir / f"p{self.count}.out", self.workdir / f"p{self.count}.err"
        assert self.proc.stdin is not None
        req = {"argv": argv, "env": env, "out": str(out), "err": str(err), "cwd": str(cwd) if cwd else None}
        if entry:
            req["entry"] = entry
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        self._last = (out, err)
        pid: int = self._read()["pid"]
        self._unwaited = pid
        return pid

    @property
    def last_files(self) -> tuple[Path, Path]:
        """(stdout, stderr) files of the last spawned process: they grow while it runs."""
        return self._last

    def wait(self, timeout: float = 0.0, pid: int | None = None) -> Outcome:
        """Wait for the last spawned process and collect its output; with a `timeout` (seconds) and
        its `pid`, a process still running then is SIGKILLed and the wait fails."""
        late = threading.Event()

        def overdue() -> None:
            late.set()
            assert pid is not None
            self.kill(pid)

        timer = threading.Timer(timeout, overdue) if timeout and pid is not None else None
        if timer is not None:
            timer.start()
        code = int(self._read()["code"])
        self._unwaited = None
        if timer is not None:
            timer.cancel()
        out, err = self._last
        # a process killed before it opened its output files leaves none
        outcome = Outcome(code, *(p.read_text() if p.exists() else "" for p in (out, err)))
        if late.is_set():
            raise AssertionError(f"agentrt did not end within {timeout} s:\n{outcome.stderr[-3000:]}")
        return outcome

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        timeout: float = 0.0,
        cwd: Path | None = None,
        entry: str | None = None,
    ) -> Outcome:
        """Spawn and wait; with a `timeout` (seconds), a process still running then is killed and
        the run fails (without one, as `crash.run_cli`'s callers expect, it is waited for).
        `entry`: "module:function" called with `argv` instead of `agent.cli.main`."""
        pid = self.spawn(argv, env, cwd, entry)
        return self.wait(timeout, pid)

    def _reap(self) -> None:
        """Kill and collect the spawned process a caller left unwaited (a test that failed meanwhile),
        so the next test's processes run."""
        if self._unwaited is not None and self.proc.poll() is None:
            self.kill(self._unwaited)
            self.wait()

    @staticmethod
    def ended(pid: int) -> bool:
        """Whether a spawned process has ended (its exit not yet collected by the server counts)."""
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")

    @staticmethod
    def kill(pid: int) -> None:
        """SIGKILL a spawned process (no-op if it already ended)."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
