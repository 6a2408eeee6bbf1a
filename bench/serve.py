"""Benchmark: `agentrt serve` against `langgraph dev` on the same graph, through the HTTP API.

Both servers run in the same invocation on the same machine, one after the other, and the table
prints them side by side with the ratio agentrt / reference (`langgraph dev`, langgraph-cli's
in-memory server). Figures, in the order they are taken:
  - server RSS at start and after creating N threads (`--threads`, default 1,000) with
    `POST /threads`: MiB, summed over the server process and its descendants from /proc (shared
    pages count once per process); lower is better;
  - POST /threads/search (`{"limit": 10}`, over those N threads, the newest `--with-values` of them
    given a finished run first, so the page carries values as agent-chat-ui lists threads),
    GET /threads/{id}/state and POST /threads/{id}/history (`{"limit": 10}`, what `useStream` with
    `fetchStateHistory` reads) of a thread with a finished run: requests per second at 1 and 50
    concurrent clients, higher is better; and the server's CPU time per request at 50 clients
    (user + system of its processes, from /proc), lower is better: the machine's other load
    disturbs it least;
  - runs.create -> first streamed event: ms from sending `POST /threads/{id}/runs/stream` (a new
    thread per run) to the first event after `metadata`, p50 and p99 (nearest rank; with fewer than
    100 runs p99 is the slowest run), `--runs` one after another and 50 at once; lower is better.
Under the table, agentrt's floors (bench/serve_floors.py): what a search must read from the durable
store alone, and the first-event figures with `persistence.fsync: batch`.
Both servers run the agentrt graph on a short scripted task (plan, answer) with the JSONL saver; for
`langgraph dev` the graph comes from langgraph.json (graph/studio.py), as in docs/tutorials/studio.md.
`agentrt-workers` is `agentrt serve` on the production-like config (Redis L2 and lease, PostgreSQL,
fsync always) with its runs on two Celery worker processes (Redis broker), streamed back through Redis;
its RSS is the server's alone (the workers are not its children).
The client runs in this process, on the same cores: the figures compare the servers, they are not
the servers' ceilings. Nothing is asserted.

    python bench/serve.py                         # both servers and the floors, about 4-7 minutes
    python bench/serve.py --only agentrt --state-requests 2000 --threads 10000
    python bench/serve.py --only agentrt-workers   # needs Redis and PostgreSQL (AGENTRT_REDIS_URL, ...)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
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
KEEPALIVE_S = 3.0
"""How long the client keeps an idle connection: less than the servers' (uvicorn's 5 s), so it never
sends a request on a connection the server is closing (a dropped request, not a server's fault)."""
Figures = dict[str, float]


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
def server(kind: str, tmp: Path, config: Path) -> Iterator[tuple[str, int]]:
    """The server's base URL and process id, once it answers `/ok`."""
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
        yield url, proc.pid
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


def _tree(root: int) -> list[int]:
    """Process `root` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def rss_mib(root: int) -> float:
    """Resident memory of process `root` and all its descendants, in MiB, read from /proc."""
    total_kib = 0
    for pid in _tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total_kib += int(line.split()[1])
    return total_kib / 1024


def cpu_ms(root: int) -> float:
    """CPU time (user + system) used so far by process `root` and its descendants, in ms."""
    ticks = 0
    for pid in _tree(root):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


async def create_threads(http: httpx.AsyncClient, n: int, clients: int = 10) -> None:
    """`n` new empty threads, `clients` requests at a time."""
    counter = iter(range(n))

    async def one() -> None:
        for _ in counter:
            await new_thread(http)

    await asyncio.gather(*(one() for _ in range(clients)))


async def rps(
    send: Callable[[], Awaitable[httpx.Response]], clients: int, total: int, pid: int | None = None
) -> tuple[float, float]:
    """Requests per second of `send` with `clients` concurrent clients, `total` requests in all, and
    the server's CPU ms per request (process `pid` and its descendants; 0 without a pid)."""
    per = max(1, total // clients)

    async def one() -> None:
        for _ in range(per):
            (await send()).raise_for_status()

    c0 = cpu_ms(pid) if pid else 0.0
    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(clients)))
    wall = time.perf_counter() - t0
    return per * clients / wall, ((cpu_ms(pid) - c0) / (per * clients) if pid else 0.0)


async def rates(out: Figures, what: str, send: Callable[[], Awaitable[httpx.Response]], total: int, pid: int) -> None:
    """`what`'s requests per second at 1 and 50 clients (a quarter of `total` at 1), and the server's
    CPU ms per request at 50 (the figure the machine's other load disturbs least)."""
    await rps(send, 1, 20)  # warm-up
    for clients in (1, 50):
        rate, cpu = await rps(send, clients, total if clients > 1 else total // 4, pid)
        out[f"{what} req/s, {clients} client(s)"] = rate
        if clients > 1:
            out[f"{what} server CPU ms/req"] = cpu


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


async def measure(url: str, pid: int, args: argparse.Namespace, headers: dict[str, str] | None = None) -> Figures:
    """All figures of one running server (see the module docstring for what each is)."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100, keepalive_expiry=KEEPALIVE_S)
    out: Figures = {}
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits, headers=headers) as http:
        out["server RSS at start, MiB"] = rss_mib(pid)
        await create_threads(http, args.threads)
        await asyncio.sleep(1)
        out[f"server RSS after {args.threads} threads, MiB"] = rss_mib(pid)

        for _ in range(args.with_values):  # the first page of the search: threads with values
            await finished_thread(http)

        def search() -> Awaitable[httpx.Response]:
            return http.post("/threads/search", json={"limit": 10})

        page = (await search()).json()
        if sum(1 for t in page if t.get("values")) < min(10, args.with_values):
            raise RuntimeError("the search's first page lacks the threads with values")

        await rates(out, "POST /threads/search", search, args.search_requests, pid)

        tid = await finished_thread(http)

        def state() -> Awaitable[httpx.Response]:
            return http.get(f"/threads/{tid}/state")

        await rates(out, "GET /threads/{id}/state", state, args.state_requests, pid)

        def history() -> Awaitable[httpx.Response]:
            return http.post(f"/threads/{tid}/history", json={"limit": 10})

        await rates(out, "POST /threads/{id}/history", history, args.state_requests, pid)

        out.update(await first_events(http, args))
    return out


async def first_events(http: httpx.AsyncClient, args: argparse.Namespace) -> Figures:
    """runs.create -> first streamed event, p50 and p99, at 1 client and at 50."""
    out: Figures = {}
    for clients, runs in ((1, args.runs), (50, 50)):
        if clients == 1:
            lat = [await first_event_ms(http) for _ in range(runs)]
        else:
            lat = list(await asyncio.gather(*(first_event_ms(http) for _ in range(runs))))
        for q in (0.50, 0.99):
            out[f"first event p{round(q * 100)} ms, {clients} client(s), {runs} runs"] = percentile(lat, q)
    return out


def on_workers(tmp: Path, args: argparse.Namespace) -> Figures:
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
        with server("agentrt-workers", tmp, cluster.config) as (url, pid):
            return asyncio.run(measure(url, pid, args, {"x-api-key": key}))
    finally:
        cluster.close()


def _num(value: float) -> str:
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def table(results: dict[str, Figures]) -> str:
    """The figures side by side, with agentrt / reference when both were measured."""
    kinds = list(results)
    ratio = "agentrt" in results and "langgraph-dev" in results
    rows = list(next(iter(results.values())))
    width = max(len(r) for r in rows)
    head = f"{'':{width}}" + "".join(f"  {k:>15}" for k in kinds) + ("  agentrt/reference" if ratio else "")
    lines = [head]
    for row in rows:
        line = f"{row:{width}}" + "".join(f"  {_num(results[k][row]):>15}" for k in kinds)
        if ratio:
            ref = results["langgraph-dev"][row]
            line += f"  {'x' + format(results['agentrt'][row] / ref, '.2f') if ref else '-':>18}"
        lines.append(line)
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=[*KINDS, "agentrt-workers"], help="measure one server only")
    p.add_argument("--threads", type=int, default=1000, help="threads created before the memory reading")
    p.add_argument("--state-requests", type=int, default=1000, help="GET state requests at 50 clients (1/4 at 1)")
    p.add_argument("--search-requests", type=int, default=500, help="threads.search requests at 50 clients (1/4 at 1)")
    p.add_argument("--with-values", type=int, default=10, help="newest threads given a finished run before the search")
    p.add_argument("--no-floors", action="store_true", help="leave out agentrt's floors (bench/serve_floors.py)")
    p.add_argument("--runs", type=int, default=20, help="sequential runs for the 1-client latency")
    args = p.parse_args()
    kinds = [args.only] if args.only else list(KINDS)
    results: dict[str, Figures] = {}
    below: list[tuple[str, float]] = []
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix=f"bench-serve-{kind}-") as d:
            tmp = Path(d)
            if kind == "agentrt-workers":
                results[kind] = on_workers(tmp, args)
            else:
                config = write_config(tmp)
                with server(kind, tmp, config) as (url, pid):
                    results[kind] = asyncio.run(measure(url, pid, args))
                if kind == "agentrt" and not args.no_floors:
                    from serve_floors import floors

                    below = floors(tmp, config, lambda c: server("agentrt", c.parent, c), first_events, args)
        print(f"{kind}: done", file=sys.stderr)
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; req/s: higher is better;"
        " ms and MiB: lower is better; ratio = agentrt / langgraph dev"
    )
    print(table(results))
    if below:
        print("agentrt's floors, what an in-memory server does not pay (bench/serve_floors.py):")
        width = max(len(k) for k, _ in below)
        for k, v in below:
            print(f"  {k:{width}}  {_num(v):>10}")


if __name__ == "__main__":
    main()
