"""Benchmark: records appended per second to the PostgreSQL record store, against the floor.

The floor: N processes, each with one connection, each inserting one row of the same size into a
plain table (`id` identity primary key, `line bytea`) and committing: `INSERT` in autocommit, the
insert and its commit in one round trip, the least a client can do per durable record. Our store:
N processes, each appending one framed record at a time to a session of its own through the
`SessionStreams` interface exactly as the saver does (`PostgresStore.session(...).append(run,
[frame], None, token)`: the record framed by `records.frame`, with a lease's fencing token, as the
runtime passes it). Both on the same database, in a schema of their own (dropped at the end), with
the same `synchronous_commit`, measured in the same run at 1, 8 and 32 concurrent sessions.

A third side, the fenced floor: the checks a fenced append at a stream position needs (the
session's fence token, the stream's end) and the insert, as the one statement a client would
write for them, sent from a bare connection in one round trip (a plain table per side, no
function, no lock, no client library of ours). The server parses and plans that statement on every
call (nothing is prepared, as behind PgBouncer's transaction pooling), so it shows what those checks
cost written the plain way. The store makes the same checks (and takes the session's lock shared,
so a lease taken over mid-append cannot interleave) in procedures whose plans each server process
keeps, and a writer appending where its own last append ended sends that end for the procedure to
check instead of looking the stream up (`jsonl_append_at`): so it can beat the fenced floor.

Processes, not threads: one Python process cannot drive 32 connections without the GIL becoming
the bottleneck, and the server runs one backend process per connection either way. Each process
connects and makes its first append (creating its stream and fence rows) before the clock starts.
The machine's cores are shared by the clients and the server, so at 32 the figures measure CPU as
much as commits; they are noisy on a busy machine: compare ratios within one run.

    python bench/store_floor.py                         # 1, 8, 32 sessions, 2 s each, fsync "always"
    python bench/store_floor.py --seconds 5 --rounds 3  # medians of 3 interleaved rounds
    python bench/store_floor.py --fsync batch           # synchronous_commit = off on both sides

Printed: the core count, the load average, the server's synchronous_commit, then records/s for the
floor, the fenced floor and the store, the store's ratio to the floor at each level, and the two
steps of that ratio (fenced floor / floor: what fencing and ordering cost written as one plain
statement; store / fenced floor: the store against that), and whether the goal (>= 0.7x the floor
at every level) is met. Nothing is asserted. AGENTRT_DATABASE_URL picks the server (default
postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
import psycopg
from psycopg import sql

from checkpointing.records import frame
from checkpointing.store.postgres import PostgresStore

URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
GOAL = 0.7
SIDES = ("floor", "fenced", "store")


def record(size: int) -> bytes:
    """A framed record of `size` bytes (newline and checksum included)."""
    pad = max(0, size - len(frame(orjson.dumps({"v": 1, "pad": ""}))))
    out = frame(orjson.dumps({"v": 1, "pad": "x" * pad}))
    assert len(out) == size, (len(out), size)
    return out


def _cpu(backend: int) -> tuple[float, float | None]:
    """CPU seconds used so far by this process and by server process `backend` (None when the
    server is not on this machine: its /proc entry is not readable)."""
    try:
        with open(f"/proc/{backend}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        server: float | None = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        server = None
    return time.process_time(), server


def _measured(backend: int, go: Event, end: Any, out: Any, step: Any) -> None:
    """Run `step` until the deadline; put (count, client CPU s, server CPU s or None)."""
    go.wait()
    (c0, s0), n, deadline = _cpu(backend), 0, end.value
    while time.monotonic() < deadline:
        step()
        n += 1
    c1, s1 = _cpu(backend)
    out.put((n, c1 - c0, None if s0 is None or s1 is None else s1 - s0))


def _floor_worker(schema: str, line: bytes, sync: str, ready: Barrier, go: Event, end: Any, out: Any) -> None:
    with psycopg.connect(URL, autocommit=True, prepare_threshold=None) as conn:
        conn.execute("SELECT set_config('synchronous_commit', %s, false)", (sync,))
        insert = sql.SQL("INSERT INTO {}.floor (line) VALUES (%s)").format(sql.Identifier(schema)).as_bytes(conn)
        conn.execute(insert, (line,))
        ready.wait()
        _measured(conn.info.backend_pid, go, end, out, lambda: conn.execute(insert, (line,)))


FENCED = (
    "WITH f AS (SELECT token FROM {s}.fenced_fence WHERE id = %(i)s AND token = %(t)s),"
    " e AS (SELECT coalesce((SELECT pos + octet_length(line) FROM {s}.fenced_rec WHERE stream = %(i)s"
    " ORDER BY pos DESC LIMIT 1), 0) AS p)"
    " INSERT INTO {s}.fenced_rec (stream, pos, line) SELECT %(i)s, e.p, %(l)s FROM e, f"
)
"""The fenced floor's statement: fence token checked, stream end found, record inserted there."""


def _fenced_worker(schema: str, line: bytes, sync: str, i: int, ready: Barrier, go: Event, end: Any, out: Any) -> None:
    with psycopg.connect(URL, autocommit=True, prepare_threshold=None) as conn:
        conn.execute("SELECT set_config('synchronous_commit', %s, false)", (sync,))
        fence = "INSERT INTO {}.fenced_fence (id, token) VALUES (%s, 1) ON CONFLICT (id) DO NOTHING"
        conn.execute(sql.SQL(fence).format(sql.Identifier(schema)), (i,))
        append = sql.SQL(FENCED.replace("{s}", "{}")).format(*[sql.Identifier(schema)] * 3).as_bytes(conn)
        args = {"i": i, "t": 1, "l": line}
        conn.execute(append, args)
        ready.wait()

        def step() -> None:
            if conn.execute(append, args).rowcount != 1:
                raise SystemExit("the fenced floor's append inserted nothing")

        _measured(conn.info.backend_pid, go, end, out, step)


def _store_worker(schema: str, line: bytes, fsync: str, i: int, ready: Barrier, go: Event, end: Any, out: Any) -> None:
    store = PostgresStore(URL, schema=schema, max_connections=1)
    try:
        streams = store.session("bench", f"session-{i:03d}", fsync)  # type: ignore[arg-type]
        streams.append("run-1", [line], None, 1)
        with store.connection("finding the server process") as conn:  # the pool's one connection
            backend = conn.info.backend_pid
        ready.wait()
        _measured(backend, go, end, out, lambda: streams.append("run-1", [line], None, 1))
    finally:
        store.close()


Measured = tuple[float, tuple[float, float] | None]
"""Records/s, and the CPU microseconds each record took in the client and in its server process
(None: not measurable)."""


def run_level(kind: str, schema: str, level: int, seconds: float, line: bytes, fsync: str) -> Measured:
    """`Measured` of `level` processes of `kind` ("floor", "fenced" or "store") for `seconds`."""
    ctx = mp.get_context("fork")
    ready, go, out = ctx.Barrier(level + 1), ctx.Event(), ctx.Queue()
    end = ctx.Value("d", 0.0)
    sync = "on" if fsync == "always" else "off"
    procs = []
    for i in range(level):
        if kind == "floor":
            target: Any = _floor_worker
            args: tuple[Any, ...] = (schema, line, sync, ready, go, end, out)
        elif kind == "fenced":
            target, args = _fenced_worker, (schema, line, sync, i + 1000 * level, ready, go, end, out)
        else:  # a session of its own per process and level
            target, args = _store_worker, (schema, line, fsync, i + 1000 * level, ready, go, end, out)
        p = ctx.Process(target=target, args=args, daemon=True)
        p.start()
        procs.append(p)
    ready.wait(timeout=120)
    t0 = time.monotonic()
    end.value = t0 + seconds
    go.set()
    got = [out.get(timeout=seconds + 120) for _ in procs]
    elapsed = max(seconds, time.monotonic() - t0)
    for p in procs:
        p.join(timeout=30)
        if p.exitcode != 0:
            raise SystemExit(f"a {kind} worker failed (exit code {p.exitcode})")
    records = sum(n for n, _, _ in got)
    if not records or any(s is None for _, _, s in got):
        return records / elapsed, None
    client, server = sum(c for _, c, _ in got), sum(s for _, _, s in got)
    return records / elapsed, (client * 1e6 / records, server * 1e6 / records)


def main(argv: list[str] | None = None) -> None:
    """Set up the schema, run interleaved rounds, print the table, drop the schema."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32], help="concurrent sessions (default 1 8 32)")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds measured per level and side (default 2)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds; medians are printed (default 1)")
    ap.add_argument("--size", type=int, default=1024, help="bytes per record, framing included (default 1024)")
    ap.add_argument(
        "--fsync", choices=("always", "batch"), default="always", help="store policy; batch = synchronous_commit off"
    )
    args = ap.parse_args(argv)
    line = record(args.size)
    schema = f"bench_floor_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(URL, schema=schema)
    store.setup()
    with psycopg.connect(URL, autocommit=True) as conn:
        server_sync = conn.execute("SHOW synchronous_commit").fetchone()
        conn.execute(
            sql.SQL(
                "CREATE TABLE {}.floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, line bytea NOT NULL)"
            ).format(sql.Identifier(schema))
        )
        conn.execute(
            sql.SQL(
                "CREATE TABLE {0}.fenced_fence (id bigint PRIMARY KEY, token bigint NOT NULL);"
                " CREATE TABLE {0}.fenced_rec (stream bigint NOT NULL, pos bigint NOT NULL, line bytea NOT NULL,"
                " PRIMARY KEY (stream, pos))"
            ).format(sql.Identifier(schema))
        )
    sync = "on" if args.fsync == "always" else "off"
    print(f"cores: {os.cpu_count()}; load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"server synchronous_commit: {server_sync[0] if server_sync else '?'}; "
        f"both sides run with synchronous_commit = {sync} (store fsync {args.fsync!r}); "
        f"records of {args.size} bytes; {args.seconds:g} s per level and side; {args.rounds} round(s); processes"
    )
    got: dict[tuple[str, int], list[Measured]] = {}
    try:
        for r in range(args.rounds):
            for level in args.levels:
                order = ("floor", "fenced", "store") if r % 2 == 0 else ("store", "fenced", "floor")
                for kind in order:
                    got.setdefault((kind, level), []).append(
                        run_level(kind, schema, level, args.seconds, line, args.fsync)
                    )
    finally:
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        store.close()
    report(got, args.levels)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _median_ratio(top: list[float], bottom: list[float]) -> float:
    """The median of the rounds' ratios (each round's sides ran next to each other: a busy spell of
    the machine weighs on both)."""
    return statistics.median(t / b if b else 0.0 for t, b in zip(top, bottom, strict=True))


def report(got: dict[tuple[str, int], list[Measured]], levels: list[int]) -> None:
    """The table: records/s (medians over rounds), ratios (medians of the rounds' ratios), and the
    CPU each record took, client and server process together (medians)."""
    print(
        f"{'sessions':>8} {'floor rec/s':>12} {'fenced rec/s':>13} {'store rec/s':>12} {'ratio':>7}"
        f"  goal >= {GOAL}x  {'fenced/floor':>12} {'store/fenced':>12}"
    )
    met = True
    for level in levels:
        rate = {k: [r for r, _ in got[(k, level)]] for k in ("floor", "fenced", "store")}
        ratio = _median_ratio(rate["store"], rate["floor"])
        met = met and ratio >= GOAL
        print(
            f"{level:>8} {statistics.median(rate['floor']):>12.0f} {statistics.median(rate['fenced']):>13.0f}"
            f" {statistics.median(rate['store']):>12.0f} {ratio:>6.2f}x  {'met    ' if ratio >= GOAL else 'NOT met'}"
            f"   {_median_ratio(rate['fenced'], rate['floor']):>11.2f}x"
            f" {_median_ratio(rate['store'], rate['fenced']):>11.2f}x"
        )
    print(f"goal (>= {GOAL}x the floor at every level): {'met' if met else 'not met'}")
    cpu = {key: [c for _, c in runs if c is not None] for key, runs in got.items()}
    if not all(cpu.values()):
        print("CPU per record: not measured (the server is not on this machine)")
        return
    print(
        "CPU per record in us, client + server process (medians); when the cores are what runs out, the"
        " store's records/s reach at most (floor CPU / store CPU) of the floor's:"
    )
    print(f"{'sessions':>8} {'floor':>14} {'fenced':>14} {'store':>14} {'floor/store':>12}")
    for level in levels:
        c, s = ({k: statistics.median(x[i] for x in cpu[(k, level)]) for k in SIDES} for i in (0, 1))
        cells = " ".join(f"{f'{c[k]:.0f} + {s[k]:.0f}':>14}" for k in SIDES)
        print(f"{level:>8} {cells} {(c['floor'] + s['floor']) / (c['store'] + s['store']):>11.2f}x")


if __name__ == "__main__":
    main()
