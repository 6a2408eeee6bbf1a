"""Benchmark: `POST /threads/search` of `agentrt serve` over many threads, on each record store.

For each store (`files`: configs/default.yaml, the embedded default; `postgres`: configs/production.yaml
with `persistence.store: postgres` on a database of its own, dropped at the end; runs in the server),
the bench creates `--threads` threads (default 1,000), gives the `--with-runs` newest of them a
finished run (so the first page returns values), and prints the milliseconds per request, one client
after another (median and p90 of `--requests`), of:
  - the first page with values (`{"limit": 10}`), the page agent-chat-ui asks for;
  - a page deep in the list (`{"limit": 10, "offset": N/2}`);
  - the same first page with `select: ["thread_id", "status"]` (no values read);
  - a metadata filter that matches one thread in ten (`{"metadata": {"bucket": 3}, "limit": 10}`);
  - `POST /threads/count` with that filter.
Nothing is asserted.

    python bench/serve_search.py                      # both stores, about 2-4 minutes
    python bench/serve_search.py --stores files --threads 10000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = [
    {"content": json.dumps({"plan": "Answer at once.", "todos": ["Answer"]})},
    {"content": "Done."},
]


def config_for(kind: str, tmp: Path) -> tuple[Path, Any]:
    """A config over store `kind` whose script restarts, and its setup (closed by the caller)."""
    sys.path.insert(0, str(ROOT))
    from tests.support.store_configs import StoreSetup

    setup = StoreSetup(kind)
    path = setup.config(tmp / kind, SCRIPT)
    data = yaml.safe_load(path.read_text())
    script = Path(data["model"]["script"])
    script.write_text(yaml.safe_dump({"on_exhausted": "restart", "responses": SCRIPT}, sort_keys=False))
    return path, setup


def timed(http: httpx.Client, method: str, url: str, body: dict[str, Any], n: int) -> tuple[float, float]:
    """Median and p90 ms of `n` requests sent one after another (after 3 warm-up requests)."""
    for _ in range(3):
        http.request(method, url, json=body).raise_for_status()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        http.request(method, url, json=body).raise_for_status()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[max(0, int(0.9 * len(times)) - 1)]


def measure(kind: str, tmp: Path, args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    from tests.support.serve import serving

    config, setup = config_for(kind, tmp)
    try:
        with serving(config, tmp / kind) as server, httpx.Client(base_url=server.url, timeout=300) as http:

            def make(i: int) -> str:
                r = http.post("/threads", json={"metadata": {"bucket": i % 10}})
                r.raise_for_status()
                return str(r.json()["thread_id"])

            with ThreadPoolExecutor(8) as pool:
                tids = list(pool.map(make, range(args.threads)))
            for tid in tids[-args.with_runs :]:
                body = {"assistant_id": "agentrt", "input": {"user_input": "go"}}
                http.post(f"/threads/{tid}/runs/wait", json=body).raise_for_status()
            first = http.post("/threads/search", json={"limit": 10}).json()
            assert any(t["values"] for t in first), "the first page has values"
            n = args.requests
            return {
                "first page, values": timed(http, "POST", "/threads/search", {"limit": 10}, n),
                f"offset {args.threads // 2}": timed(
                    http, "POST", "/threads/search", {"limit": 10, "offset": args.threads // 2}, n
                ),
                "first page, select (no values)": timed(
                    http, "POST", "/threads/search", {"limit": 10, "select": ["thread_id", "status"]}, n
                ),
                "metadata filter": timed(http, "POST", "/threads/search", {"metadata": {"bucket": 3}, "limit": 10}, n),
                "count, metadata filter": timed(http, "POST", "/threads/count", {"metadata": {"bucket": 3}}, n),
            }
    finally:
        setup.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stores", default="files,postgres", help="comma-separated: files, postgres")
    p.add_argument("--threads", type=int, default=1000)
    p.add_argument("--with-runs", type=int, default=10, help="newest threads given a finished run")
    p.add_argument("--requests", type=int, default=100, help="timed requests per figure")
    args = p.parse_args()
    results: dict[str, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-serve-search-") as tmp:
        for kind in args.stores.split(","):
            results[kind] = measure(kind, Path(tmp), args)
    kinds = list(results)
    print(f"threads.search at {args.threads} threads, ms per request (median / p90), 1 client")
    print("| | " + " | ".join(kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for row in results[kinds[0]]:
        cells = [f"{results[k][row][0]:.1f} / {results[k][row][1]:.1f}" for k in kinds]
        print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
