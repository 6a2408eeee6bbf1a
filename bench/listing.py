"""Benchmark: listing sessions by the index of sessions, at 1,000 / 10,000 / 100,000 sessions, on
both backends of the index: the files store's index (the embedded default) and the SQL session table
on PostgreSQL (PRIMARY mode on a server database: the table is the index).

For each N and backend, a fresh store is seeded with N sessions (every 50th PAUSED, no turns run):
- files: through the files store's own API (`JsonlSessionStore.create_log` + `put`: the event-log
  header, session.json and the index row), with fsync off, in a fresh base_dir;
- postgres: the rows `SqlSessionStore.put` writes (`SqlSessionStore.row`), inserted in batches
  (executemany), into a schema of its own made by the migrations (dropped at the end).
Then printed, each with its ratio to the same backend's figure at the first N:
- `agentrt sessions --limit 20` as a fresh process (the installed console script; median of runs;
  the floor, the same command with no session at all, is printed first: Python's start and imports;
  postgres: with a config in PRIMARY mode whose database_url is the bench's schema),
- the in-process page listing (20 rows, the same code the command runs: `page_sessions`, `sql_page`),
- the next page by cursor (`--after`), and a filtered page (`--status PAUSED`, few match),
- one index update (files: `JsonlSessionStore.index_session`, one UPSERT in SQLite; postgres:
  `SqlSessionStore.put` of one session, the row UPSERT, committed synchronously),
- files only: the walk the listing did before the index (`JsonlSessionStore.list`), up to --walk-max.
Then the goals: a page in process under 50 ms, and one index update at the largest N within 1.5x
of the first. Nothing is asserted; the figures are noisy on a busy machine (the load average is
printed).

    python bench/listing.py                     # N = 1,000 and 10,000, both backends
    python bench/listing.py --n 1000 10000 100000
    python bench/listing.py --backends postgres

AGENTRT_DATABASE_URL picks the PostgreSQL server (default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import sqlalchemy as sa  # noqa: E402
import yaml  # noqa: E402
from psycopg import sql as pgsql  # noqa: E402

from agent.session.lifecycle import SessionStatus  # noqa: E402
from agent.session.session import ChatSession  # noqa: E402
from agent.session.stores.jsonl import JsonlSessionStore  # noqa: E402
from agent.session.stores.listing import page_sessions, sql_page  # noqa: E402
from agent.session.stores.sql import SqlSessionStore  # noqa: E402
from checkpointing.session_index import RowFilter  # noqa: E402

URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ("files", "postgres")
PAGE_GOAL_MS = 50.0
FLAT_GOAL = 1.5


def sessions(n: int) -> Iterator[ChatSession]:
    """N sessions of tenant "default", newest activity last, every 50th PAUSED."""
    start = datetime.now(UTC) - timedelta(days=1)
    for i in range(n):
        yield ChatSession(
            session_id=f"s{i:07d}",
            agent_id="agentrt",
            tenant_id="default",
            user_id="user",
            created_at=start,
            last_active_time=start + timedelta(milliseconds=i),
            status=SessionStatus.PAUSED if i % 50 == 0 else SessionStatus.ACTIVE,
            version=1,
        )


def seed(base: Path, n: int) -> float:
    """N sessions through the files store's API, fsync off; seconds taken."""
    store = JsonlSessionStore(base, fsync="never")
    t0 = time.perf_counter()
    for i, s in enumerate(sessions(n)):
        store.create_log(s, sync_dir=False)
        store.put(s)
        if i % 256 == 255:
            store._logs.clear()  # a seeding process need not keep logs open
    store.index.close()
    return time.perf_counter() - t0


def seed_sql(store: SqlSessionStore, n: int, batch: int = 2000) -> float:
    """N session rows as `SqlSessionStore.put` writes them, inserted in batches; seconds taken."""
    t0 = time.perf_counter()
    rows = []
    for s in sessions(n):
        rows.append(store.row(s))
        if len(rows) == batch:
            with store.transaction("seeding") as conn:
                conn.execute(sa.insert(store.sessions), rows)
            rows = []
    if rows:
        with store.transaction("seeding") as conn:
            conn.execute(sa.insert(store.sessions), rows)
    with store.transaction("analyzing") as conn:
        conn.execute(sa.text("ANALYZE sessions"))  # as autovacuum would soon after a bulk load
    return time.perf_counter() - t0


def timed(fn: Callable[[], object], runs: int) -> float:
    """Median seconds of `runs` calls."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def cli(work: Path, runs: int, args: tuple[str, ...] = (), expect: str = "") -> float:
    """`agentrt sessions --limit 20 [args]` as a fresh process in `work` (median seconds); the first
    (untimed) run's output must name `expect`."""
    exe = shutil.which("agentrt") or "agentrt"
    # A user's install has its bytecode cached: let the warm-up run write it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)

    def once() -> str:
        done = subprocess.run(
            [exe, "sessions", "--limit", "20", *args], cwd=work, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"agentrt sessions failed: {done.stderr}")
        return done.stdout

    if expect not in once():  # also warms the page cache and the bytecode
        raise SystemExit(f"agentrt sessions did not list {expect}: is the bench listing the seeded store?")
    return timed(once, runs)


def measure(n: int, runs: int, cli_runs: int, walk_max: int) -> dict[str, float]:
    """Every figure at N sessions, files backend."""
    work = Path(tempfile.mkdtemp(prefix=f"agentrt-listing-{n}-"))
    try:
        base = work / ".agentrt"
        figures = {"seed_s": seed(base, n)}
        store = JsonlSessionStore(base)
        first = page_sessions(store, "default", limit=20)
        figures["page_ms"] = 1000 * timed(lambda: page_sessions(store, "default", limit=20), runs * 5)
        after = first.next_cursor
        figures["next_page_ms"] = 1000 * timed(lambda: page_sessions(store, "default", limit=20, after=after), runs * 5)
        figures["paused_page_ms"] = 1000 * timed(
            lambda: page_sessions(store, "default", RowFilter(status="PAUSED"), limit=20), runs * 5
        )
        one = store.get("default", "s0000000")
        assert one is not None
        figures["update_ms"] = 1000 * timed(lambda: store.index_session(one), runs * 20)
        figures["cli_s"] = cli(work, cli_runs, expect=f"s{n - 1:07d}")
        if n <= walk_max:
            figures["walk_s"] = timed(lambda: store.list("default"), 1)
        store.index.close()
        return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure_sql(n: int, runs: int, cli_runs: int) -> dict[str, float]:
    """Every figure at N sessions, the SQL session table on PostgreSQL (a schema of its own)."""
    schema = f"bench_listing_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
    url = f"{URL}{'&' if '?' in URL else '?'}options={quote(f'-csearch_path={schema}')}"
    work = Path(tempfile.mkdtemp(prefix=f"agentrt-listing-sql-{n}-"))
    store = SqlSessionStore(url, create=True)
    try:
        base = work / ".agentrt"
        jsonl = JsonlSessionStore(base)  # the event logs a page reads its first messages from (none here)
        figures = {"seed_s": seed_sql(store, n)}
        first = sql_page(store, jsonl, "default", limit=20)
        assert len(first.items) == 20 and first.items[0].session.session_id == f"s{n - 1:07d}"
        figures["page_ms"] = 1000 * timed(lambda: sql_page(store, jsonl, "default", limit=20), runs * 5)
        after = first.next_cursor
        figures["next_page_ms"] = 1000 * timed(
            lambda: sql_page(store, jsonl, "default", limit=20, after=after), runs * 5
        )
        figures["paused_page_ms"] = 1000 * timed(
            lambda: sql_page(store, jsonl, "default", RowFilter(status="PAUSED"), limit=20), runs * 5
        )
        one = store.get("default", "s0000000")
        assert one is not None
        figures["update_ms"] = 1000 * timed(lambda: store.put(one), runs * 20)
        config = work / "sql.yaml"
        config.write_text(
            yaml.safe_dump({"persistence": {"base_dir": str(base), "mode": "PRIMARY", "database_url": url}}),
            encoding="utf-8",
        )
        figures["cli_s"] = cli(work, cli_runs, ("--config", str(config)), expect=f"s{n - 1:07d}")
        return figures
    finally:
        store.dispose()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(pgsql.SQL("DROP SCHEMA {} CASCADE").format(pgsql.Identifier(schema)))
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 10000], help="session counts (default 1000 10000)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS), help="default: both")
    parser.add_argument("--runs", type=int, default=3, help="runs of each timing (the CLI's; in-process x5)")
    parser.add_argument("--cli-runs", type=int, default=7, help="fresh processes timed per N (median; default 7)")
    parser.add_argument("--walk-max", type=int, default=10000, help="time the old walk up to this N (default 10000)")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}; load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    empty = Path(tempfile.mkdtemp(prefix="agentrt-listing-0-"))
    try:
        floor = cli(empty, args.cli_runs, expect="no sessions")
        print(f"startup floor: `agentrt sessions --limit 20` with no session at all: {floor:.2f} s")
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    base: dict[str, dict[str, float]] = {}
    got: dict[str, dict[int, dict[str, float]]] = {b: {} for b in args.backends}
    heads = ("N", "backend", "seed s", "cli s", "page ms", "next ms", "PAUSED ms", "update ms", "old walk s")
    print(f"{heads[0]:>8} {heads[1]:>9} {heads[2]:>7} {heads[3]:>12} " + " ".join(f"{h:>14}" for h in heads[4:]))
    for n in args.n:
        for backend in args.backends:
            if backend == "files":
                f = measure(n, args.runs, args.cli_runs, args.walk_max)
            else:
                f = measure_sql(n, args.runs, args.cli_runs)
            got[backend][n] = f
            b = base.setdefault(backend, f)
            cells = [
                _cell(f, b, "cli_s", ".2f"),
                _cell(f, b, "page_ms", ".2f"),
                _cell(f, b, "next_page_ms", ".2f"),
                _cell(f, b, "paused_page_ms", ".2f"),
                _cell(f, b, "update_ms", ".3f"),
                _cell(f, b, "walk_s", ".2f"),
            ]
            row = f"{n:>8} {backend:>9} {f['seed_s']:>7.1f} {cells[0]:>12} " + " ".join(f"{c:>14}" for c in cells[1:])
            print(row, flush=True)
    first, last = args.n[0], args.n[-1]
    for backend in args.backends:
        worst = max(max(f["page_ms"], f["next_page_ms"], f["paused_page_ms"]) for f in got[backend].values())
        flat = got[backend][last]["update_ms"] / got[backend][first]["update_ms"]
        print(
            f"{backend}: slowest page in process {worst:.2f} ms (goal < {PAGE_GOAL_MS:g} ms: "
            f"{'met' if worst < PAGE_GOAL_MS else 'not met'}); index update at N={last:,} is {flat:.2f}x N={first:,} "
            f"(goal <= {FLAT_GOAL}x: {'met' if flat <= FLAT_GOAL else 'not met'})"
        )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _cell(f: dict[str, float], base: dict[str, float], key: str, fmt: str) -> str:
    """A figure with its ratio to the first N's."""
    if key not in f:
        return "-"
    ratio = f[key] / base[key] if base.get(key) else 1.0
    return f"{format(f[key], fmt)} ({ratio:.1f}x)"


if __name__ == "__main__":
    main()
