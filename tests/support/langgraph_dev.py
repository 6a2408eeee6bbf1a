"""Start `langgraph dev` (langgraph-cli's in-memory Agent Server) on the repo's graph, offline, on a
free loopback port, and stop it by its process group."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.runners import ROOT
from tests.support.serve import free_port
from tests.support.shell_env import environ_copy

START_BOUND_S = 90.0
# Everything the server or the CLI would otherwise send out (analytics, version checks, tracing).
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
# Skipped only outside CI: there, `pip install -e '.[dev]'` must have brought the CLI.
needs_langgraph_cli = pytest.mark.skipif(
    shutil.which("langgraph") is None and os.environ.get("CI") != "true",
    reason="needs langgraph-cli[inmem]: pip install -e '.[dev]'",
)


def studio_project(tmp_path: Path) -> Path:
    """The repo's langgraph.json with its relative paths anchored at the repo (the server runs in tmp)."""
    spec = json.loads((ROOT / "langgraph.json").read_text())

    def anchor(path: str) -> str:
        return str(ROOT / path[2:]) if path.startswith("./") else path

    spec["dependencies"] = [str(ROOT) if d == "." else d for d in spec.get("dependencies", [])]
    spec["graphs"] = {k: anchor(v) for k, v in spec["graphs"].items()}
    spec["checkpointer"]["path"] = anchor(spec["checkpointer"]["path"])
    project = tmp_path / "studio"
    project.mkdir()
    (project / "langgraph.json").write_text(json.dumps(spec))
    return project


@contextmanager
def langgraph_dev(tmp_path: Path, config: Path) -> Iterator[str]:
    """A `langgraph dev` server on the agent graph with `config`; yields its base URL."""
    project = studio_project(tmp_path)
    port = free_port()
    env = {k: v for k, v in environ_copy().items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env.update(OFFLINE_ENV, AGENTRT_CONFIG=str(config), PYTHONPATH=str(ROOT))
    env.pop("AGENTRT_BASE_DIR", None)
    log_path = tmp_path / "server.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        ["langgraph", "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
        cwd=project,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_BOUND_S
        while True:
            assert proc.poll() is None, "the server exited: " + log_path.read_text()[-3000:]
            try:
                if httpx.get(f"{url}/ok", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start: " + log_path.read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        log.close()
