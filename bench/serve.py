"""Benchmark: `agentrt serve` against `langgraph dev` on the same graph, through the HTTP API.

Figures, at 1 and 50 concurrent clients:
  - GET /threads/{id}/state: requests per second (a thread with a finished run);
  - runs.create -> first streamed event: latency from `POST /threads/{id}/runs/stream` (a new thread
    per run) to the first event after `metadata` (p50 / p95 / max, milliseconds).
Both servers run the agentrt graph on a short scripted task (plan, answer) with the JSONL saver; for
`langgraph dev` the graph comes from langgraph.json (graph/studio.py), as in docs/tutorials/studio.md.
`agentrt-workers` is `agentrt serve` on the production-like config (Redis L2 and lease, PostgreSQL,
fsync always) with its runs on two Celery worker processes (Redis broker), streamed back through Redis.
The client runs in this process, on the same cores: the figures compare the servers, they are not
the servers' ceilings. Nothing is asserted.

    python bench/serve.py                         # both servers, about 2-4 minutes
    python bench/serve.py --only agentrt --state-requests 2000
    python bench/serve.py --only agentrt-workers   # needs Redis and PostgreSQL (AGENTRT_REDIS_URL, ...)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = [
    {"content": json.dumps({"plan": "Answer at once.", "todos": ["Answer"]})},
    {"content": "Done."},
]
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}


KINDS = ("agentrt", "langgraph-dev")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(tmp: Path) -> Path:
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data["persistence"]["base_dir"] = str(tmp / "agentrt")
    script = tmp / "script.yaml"
    script.write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": SCRIPT}, sort_keys=False))
    data["model"]["script"] = str(script)
    data["datasets"] = []
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def studio_project(tmp: Path) -> Path:
    spec = json.loads((ROOT / "langgraph.json").read_text())

    def anchor(path: str) -> str:
        return str(ROOT / path[2:]) if path.startswith("./") else path

    spec["dependencies"] = [str(ROOT) if d == "." else d for d in spec.get("dependencies", [])]
    spec["graphs"] = {k: anchor(v) for k, v in spec["graphs"].items()}
    spec["checkpointer"]["path"] = anchor(spec["checkpointer"]["path"])
    project = tmp / "studio"
    project.mkdir()
    (project / "langgraph.json").write_text(json.dumps(spec))
    return project


@contextmanager
def server(kind: str, tmp: Path, config: Path) -> Iterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env.update(OFFLINE_ENV, PYTHONPATH=str(ROOT), AGENTRT_CONFIG=str(config))
    env.pop("AGENTRT_BASE_DIR", None)
    if kind.startswith("agentrt"):
        cmd = [sys.executable, "-m", "agent.cli", "serve", "--port", str(port), "--config", str(config)]
        cwd = tmp
    else:
        cmd = ["langgraph", "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)]
        cwd = studio_project(tmp)
    log = (tmp / f"{kind}.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"{kind} exited: {(tmp / f'{kind}.log').read_text()[-2000:]}")
            try:
                if httpx.get(url + "/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{kind} did not start")
            time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


async def new_thread(http: httpx.AsyncClient) -> str:
    r = await http.post("/threads", json={})
    r.raise_for_status()
    return str(r.json()["thread_id"])


async def first_event_ms(http: httpx.AsyncClient) -> float:
    """One run on a new thread: ms from sending runs.stream to the first event after `metadata`."""
    tid = await new_thread(http)
    body = {"assistant_id": "agentrt", "input": {"user_input": "go"}, "stream_mode": ["updates"]}
    t0 = time.perf_counter()
    first: float | None = None
    async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if line.startswith("event:") and "metadata" not in line and first is None:
                first = (time.perf_counter() - t0) * 1000
    if first is None:
        raise RuntimeError("the run streamed no event")
    return first


async def finished_thread(http: httpx.AsyncClient) -> str:
    tid = await new_thread(http)
    r = await http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "agentrt", "input": {"user_input": "go"}})
    r.raise_for_status()
    return tid


async def state_rps(http: httpx.AsyncClient, tid: str, clients: int, total: int) -> float:
    per = max(1, total // clients)

    async def one() -> None:
        for _ in range(per):
            (await http.get(f"/threads/{tid}/state")).raise_for_status()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(clients)))
    return per * clients / (time.perf_counter() - t0)


async def measure(url: str, args: argparse.Namespace, headers: dict[str, str] | None = None) -> dict[str, str]:
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    out: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits, headers=headers) as http:
        tid = await finished_thread(http)
        await state_rps(http, tid, 1, 20)  # warm-up
        for clients in (1, 50):
            total = args.state_requests if clients > 1 else args.state_requests // 4
            out[f"GET state rps, {clients} client(s)"] = f"{await state_rps(http, tid, clients, total):.0f}"
        for clients, runs in ((1, args.runs), (50, 50)):
            lat: list[float] = []
            if clients == 1:
                for _ in range(runs):
                    lat.append(await first_event_ms(http))
            else:
                lat = list(await asyncio.gather(*(first_event_ms(http) for _ in range(runs))))
            lat.sort()
            p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
            out[f"first event ms, {clients} client(s) (p50/p95/max)"] = (
                f"{statistics.median(lat):.0f} / {p95:.0f} / {lat[-1]:.0f}"
            )
    return out


def on_workers(tmp: Path, args: argparse.Namespace) -> dict[str, str]:
    """The figures of `agentrt serve` whose runs go to two Celery worker processes."""
    sys.path.insert(0, str(ROOT))
    from tests.support.celery_drill import open_cluster

    cluster = open_cluster(tmp, "redis", SCRIPT, visibility_timeout_s=3600)
    try:
        key = "bench-serve-workers-key-0123"
        data = yaml.safe_load(cluster.config.read_text())
        data["serve"] = {"api_keys": [{"key": key, "tenant_id": cluster.tenant}]}
        cluster.config.write_text(yaml.safe_dump(data, sort_keys=False))
        cluster.start_worker("bench", concurrency=2, hooks=False)
        with server("agentrt-workers", tmp, cluster.config) as url:
            return asyncio.run(measure(url, args, {"x-api-key": key}))
    finally:
        cluster.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=[*KINDS, "agentrt-workers"], help="measure one server only")
    p.add_argument("--state-requests", type=int, default=1000, help="GET state requests at 50 clients (1/4 at 1)")
    p.add_argument("--runs", type=int, default=10, help="sequential runs for the 1-client latency")
    args = p.parse_args()
    kinds = [args.only] if args.only else list(KINDS)
    results: dict[str, dict[str, str]] = {}
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix=f"bench-serve-{kind}-") as d:
            tmp = Path(d)
            if kind == "agentrt-workers":
                results[kind] = on_workers(tmp, args)
            else:
                with server(kind, tmp, write_config(tmp)) as url:
                    results[kind] = asyncio.run(measure(url, args))
        print(f"{kind}: done", file=sys.stderr)
    rows = list(next(iter(results.values())))
    width = max(len(r) for r in rows)
    print(f"{'':{width}}  " + "  ".join(f"{k:>18}" for k in kinds))
    for row in rows:
        print(f"{row:{width}}  " + "  ".join(f"{results[k][row]:>18}" for k in kinds))


if __name__ == "__main__":
    main()
