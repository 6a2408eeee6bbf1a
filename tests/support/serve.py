"""Start `agentrt serve` as a real subprocess on a free loopback port, and stop it (SIGTERM or SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.runners import ROOT, make_config

START_BOUND_S = 60.0
NAP_SECONDS = 0.8
# plan, four slow read-only steps, answer: about four seconds of run to cancel or crash in.
SLOW_SCRIPT: list[dict[str, Any]] = [
    {"content": json.dumps({"plan": "Rest four times, then answer.", "todos": ["Rest", "Answer"]})},
    *({"tool_calls": [{"name": "nap", "args": {"seconds": NAP_SECONDS}}]} for _ in range(4)),
    {"content": "Rested four times."},
]
SLOW_TOOLS = {"custom": [{"path": "tests.support.serve_tools:nap", "effect": "read_only"}]}


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def slow_config(tmp_path: Path, **sections: Any) -> Path:
    """The default config with the slow script and the `nap` tool."""
    return make_config(tmp_path, SLOW_SCRIPT, tools=SLOW_TOOLS, **sections)


@dataclass
class Server:
    """A running `agentrt serve` subprocess."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL the whole process group (no cleanup, like a crash)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit."""
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        except ProcessLookupError:
            pass


def answering_config(tmp_path: Path, **sections: Any) -> Path:
    """A config whose model answers "Done." to every call, with no planning step (`sections` added)."""
    import yaml

    script = tmp_path / "answer.yaml"
    script.write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": [{"content": "Done."}]}))
    return make_config(tmp_path, model={"script": str(script)}, loop={"planning": "never"}, **sections)


def env() -> dict[str, str]:
    """The environment of our subprocesses: this worktree's code first."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "AGENTRT_DEBUG": ""}


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` holds the listening TCP socket of `port` (read from /proc): an answer on
    the port may come from another test's server that took a port this one was about to bind."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(parts[9])
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd).removeprefix("socket:[").removesuffix("]") in inodes:
                return True
        except OSError:
            continue
    return False


def start_server(config: Path, cwd: Path, port: int | None = None, host: str = "127.0.0.1") -> Server:
    """Start the server and wait until it answers `/ok` on a port it holds itself (a port taken by
    another test's server meanwhile: tried again on a new one, when no port was asked for)."""
    for attempt in range(3):
        chosen = port or free_port()
        server = _start(config, cwd, chosen, host)
        if server is not None:
            return server
        if port is not None or attempt == 2:
            break
    raise AssertionError(f"agentrt serve could not bind a port; see the logs in {cwd}")


def _start(config: Path, cwd: Path, port: int, host: str) -> Server | None:
    log = cwd / f"serve-{port}.log"
    out = log.open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "serve", "--host", host, "--port", str(port), "--config", str(config)],
        cwd=cwd,
        env=env(),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = Server(f"http://{host}:{port}", proc, log)
    deadline = time.monotonic() + START_BOUND_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if "address already in use" in log.read_text():
                return None
            raise AssertionError(f"agentrt serve exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{server.url}/ok", timeout=1).status_code == 200 and listens(proc.pid, port):
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.kill()
    raise AssertionError(f"agentrt serve did not answer /ok within {START_BOUND_S}s:\n{log.read_text()}")


@contextmanager
def serving(config: Path, cwd: Path) -> Iterator[Server]:
    """A server for the duration of the block."""
    server = start_server(config, cwd)
    try:
        yield server
    finally:
        server.stop()


def cli(config: Path, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `agentrt ...` (as `python -m agent.cli`) against the same config."""
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args[:1], "--config", str(config), *args[1:]],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
