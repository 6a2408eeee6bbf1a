"""`agentrt doctor ID --repair` on the PostgreSQL store, driven through the installed `agentrt` as a
user meets it (configs/production.yaml: `persistence.store: postgres`, a database of this module's own).

A row's line is damaged in SQL (one byte of the middle of the LAST row of a stream flipped: what a
disk or a hand-made UPDATE does; an append is one transaction, so a crash or a killed connection
never leaves half a row) in each stream that matters (a run's checkpoints, `@events`, `@journal`)
of a session in each run status (COMPLETED, PAUSED at its approval, RUNNING killed after its third
tool call). Every case must go:

- the next command (`run --session ID` / `resume ID --approve` / `resume ID`) is refused with one
  `agentrt: error:` line, or goes on (never a crash);
- `agentrt doctor ID` exits 1 with a FAIL naming `agentrt doctor ID --repair`;
- `agentrt doctor ID --repair` cuts the damaged row (kept in the document `<file>.broken`), and the
  doctor then has no FAIL;
- the next command then succeeds, `agentrt show ID` lists every entry it listed before (minus at
  most the cut one, for the event log), and no completed tool call runs twice;
- the other tenant's session, of the same id space, is byte for byte what it was.

A damaged row followed by intact ones is corruption, as a bad line inside a file is: the doctor
names a backup, and `--repair` leaves it as it is.

By default each status damages one stream, in rotation (COMPLETED its checkpoints, PAUSED its
`@events`, RUNNING its `@journal`), so every status and every stream is tried once;
`AGENTRT_PG_REPAIR_ALL=1` (or `AGENTRT_FULL_DRILLS=1`) damages every stream under every status:

    AGENTRT_PG_REPAIR_ALL=1 python -m pytest -q tests/integration/doctor/test_pg_repair_cli.py
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.cli.console import Ran, agentrt
from tests.support.celery_drill import database_url
from tests.support.drills import switch
from tests.support.store_configs import StoreSetup

TEXT = "Summarise the 2026 sales by region"
STATUSES = ("COMPLETED", "PAUSED", "RUNNING")
STREAMS = ("checkpoints", "@events", "@journal")
FILES = {"checkpoints": "checkpoints.jsonl", "@events": "events.jsonl", "@journal": "journal.jsonl"}
TENANT, OTHER = "acme", "globex"
ALL = switch("AGENTRT_PG_REPAIR_ALL")
LEASE_TTL_S = 2.0
"""Short, so the lease of a run killed mid-way lapses soon (what `resume` and `--repair` wait for)."""


@dataclass
class Pg:
    """The module's store: one config, one database."""

    cwd: Path
    config: Path
    database: str

    def cli(self, *args: str, tenant: str = TENANT, extra_env: dict[str, str] | None = None) -> Ran:
        """`agentrt ARGS` as the tenant."""
        return agentrt("--config", str(self.config), "--tenant", tenant, *args, cwd=self.cwd, extra_env=extra_env)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """The rows `query` returns (none for a statement that returns none)."""
        with psycopg.connect(database_url(self.database), autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pg]:
    """A PostgreSQL store of its own (dropped after the module)."""
    setup = StoreSetup("postgres")
    where = tmp_path_factory.mktemp("pgrepair")
    config = setup.config(where, persistence={"lease_ttl_s": LEASE_TTL_S})
    assert setup.database is not None
    yield Pg(where, config, setup.database)
    setup.close()


@pytest.fixture(scope="module")
def other(pg: Pg) -> tuple[str, dict[str, bytes]]:
    """The other tenant's COMPLETED session and its rows, made once: every case must leave them as they are."""
    other_sid = _make(pg, "COMPLETED", tenant=OTHER)
    return other_sid, _rows(pg, OTHER, other_sid)


def _streams(status: str) -> tuple[str, ...]:
    """The streams damaged under `status`: all of them, or the status's one in the rotation."""
    return STREAMS if ALL else STREAMS[STATUSES.index(status) :: len(STATUSES)]


def _make(pg: Pg, status: str, tenant: str = TENANT) -> str:
    extra = {"AGENTRT_CRASH_AT": "after_tool_execute:3"} if status == "RUNNING" else None
    args = ["run", TEXT] if status == "PAUSED" else ["run", "--approve-all", TEXT]
    ran = pg.cli(*args, tenant=tenant, extra_env=extra)
    assert ran.code == (137 if status == "RUNNING" else 0), ran.err
    if status == "RUNNING":
        time.sleep(LEASE_TTL_S + 0.5)  # the killed run's lease lapses
    found = re.search(r"\bsession (s-[0-9a-f]+)", ran.both)
    assert found, ran.both
    return found.group(1)


def _go_on(status: str, sid: str) -> list[str]:
    if status == "COMPLETED":
        return ["run", "--session", sid, "--approve-all", "again"]
    return ["resume", sid, "--approve"] if status == "PAUSED" else ["resume", sid]


def _rows(pg: Pg, tenant: str, sid: str) -> dict[str, bytes]:
    """Every stream's rows and every document of a session, by name."""
    out = {
        f"{run}@{pos}": bytes(line)
        for run, pos, line in pg.sql(
            "SELECT s.run, r.pos, r.line FROM jsonl_streams s JOIN jsonl_records r ON r.stream = s.id"
            " WHERE s.tenant = %s AND s.thread = %s",
            tenant,
            sid,
        )
    }
    docs = pg.sql("SELECT name, body FROM jsonl_documents WHERE tenant = %s AND thread = %s", tenant, sid)
    out.update({f"doc {name}": bytes(body) for name, body in docs})
    return out


def _stream_id(pg: Pg, sid: str, stream: str) -> int:
    if stream == "checkpoints":
        found = pg.sql(
            "SELECT id FROM jsonl_streams WHERE tenant = %s AND thread = %s AND left(run, 1) <> '@' ORDER BY run",
            TENANT,
            sid,
        )
    else:
        found = pg.sql(
            "SELECT id FROM jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s", TENANT, sid, stream
        )
    return int(found[-1][0])


def _flip(pg: Pg, sid: str, stream: str, which: int = -1) -> tuple[int, bytes]:
    """Flip one byte in the middle of row `which` (-1: the last) of the stream: (its position, its old line)."""
    stream_id = _stream_id(pg, sid, stream)
    rows = pg.sql("SELECT pos, line FROM jsonl_records WHERE stream = %s ORDER BY pos", stream_id)
    pos, line = int(rows[which][0]), bytearray(rows[which][1])
    old = bytes(line)
    line[len(line) // 2] ^= 0x01
    pg.sql("UPDATE jsonl_records SET line = %s WHERE stream = %s AND pos = %s", bytes(line), stream_id, pos)
    return pos, old


def _entries(pg: Pg, sid: str) -> list[str]:
    ran = pg.cli("show", sid, "--json", "--last", "100000")
    assert ran.code == 0, ran.err
    return [str(e["id"]) for e in json.loads(ran.out)["entries"]]


def _completions(pg: Pg, sid: str) -> Counter[tuple[str, str]]:
    rows = pg.sql(
        "SELECT r.line FROM jsonl_streams s JOIN jsonl_records r ON r.stream = s.id"
        " WHERE s.tenant = %s AND s.thread = %s AND s.run = '@journal' ORDER BY r.pos",
        TENANT,
        sid,
    )
    out: Counter[tuple[str, str]] = Counter()
    for (line,) in rows:
        try:
            rec = json.loads(bytes(line))
        except ValueError:
            continue  # the damaged row itself
        if rec.get("kind") == "completed":
            out[(str(rec["run_id"]), str(rec["tool_call_id"]))] += 1
    return out


def _fails(ran: Ran) -> list[str]:
    return [ln for ln in ran.out.splitlines() if ln.startswith("[FAIL]")]


def _case(pg: Pg, status: str, stream: str, other: tuple[str, dict[str, bytes]]) -> None:
    case = f"{status} {stream}"
    sid = _make(pg, status)
    before = _entries(pg, sid)
    doctor = pg.cli("doctor", sid)
    assert not [ln for ln in _fails(doctor) if "files:" in ln], f"{case}: damaged before any damage\n{doctor.out}"
    done_before = _completions(pg, sid)
    pos, old = _flip(pg, sid, stream)
    name = FILES[stream]
    repair = f"agentrt doctor {sid} --repair"

    go_on = _go_on(status, sid)
    ran = pg.cli(*go_on)
    if ran.code != 0:  # refused (maybe after a start: a read of the damaged row stops the run) with one line
        last = [ln for ln in ran.err.splitlines() if ln.strip()][-1]
        assert last.startswith("agentrt: error: ") and "Traceback" not in ran.err, f"{case}: {ran.err}"
        assert "a bug" not in last and f"agentrt doctor {sid}" in last.replace(" ID", f" {sid}"), f"{case}: {last}"
    doctor = pg.cli("doctor", sid)
    files = [ln for ln in _fails(doctor) if ln.startswith("[FAIL] files:")]
    assert doctor.code == 1 and files and name in files[0] and repair in doctor.out, (
        f"{case}: doctor said\n{doctor.out}"
    )

    fixed = pg.cli("doctor", sid, "--repair")
    said = re.search(rf"^cut the damaged tail of (runs/[^/]+/)?{re.escape(name)} at byte {pos} ", fixed.out, re.M)
    assert fixed.code == 0 and said, f"{case}: {fixed.both}"
    again = pg.cli("doctor", sid)
    assert again.code == 0 and not _fails(again), f"{case}: after --repair the doctor said\n{again.out}"
    kept = pg.sql("SELECT name, body FROM jsonl_documents WHERE tenant = %s AND thread = %s", TENANT, sid)
    broken = {str(n): bytes(b) for n, b in kept if str(n).endswith(".broken")}
    assert len(broken) == 1, f"{case}: {sorted(broken)}"
    ((kept_name, kept_body),) = broken.items()
    assert kept_name.endswith(f"{name}.broken") and len(kept_body) == len(old) and kept_body != old, case

    ran = pg.cli(*go_on)
    if ran.code == 4 and f"agentrt resume {sid}" in ran.err and go_on[0] == "run":
        # The refused command had started a run that stopped at the damaged row: it is resumed.
        ran = pg.cli("resume", sid, "--approve-all")
    elif ran.code == 4 and "no pending approval" in ran.err:
        # The row cut held the pending approval: the doctor said to resume, which asks again.
        assert f"next: `agentrt resume {sid}`" in again.out, f"{case}: {again.out}"
        asked = pg.cli("resume", sid)
        assert asked.code == 0 and "approval needed" in asked.both, f"{case}: {asked.both}"
        ran = pg.cli(*go_on)
    assert ran.code == 0, f"{case}: {' '.join(go_on)} after --repair exited {ran.code}: {ran.err}"
    after = _entries(pg, sid)
    lost = [e for e in before if e not in after]
    assert len(lost) <= (1 if stream == "@events" else 0), f"{case}: show lost {lost}"
    done_after = _completions(pg, sid)
    assert all(n == 1 for n in done_after.values()), f"{case}: a tool call completed twice: {done_after}"
    assert set(done_before) - {k for k, n in done_before.items() if stream == "@journal"} <= set(done_after), case
    assert pg.cli("doctor", sid).code == 0, case
    other_sid, other_rows = other
    assert _rows(pg, OTHER, other_sid) == other_rows, f"{case}: the other tenant's session changed"


@pytest.mark.parametrize("status", STATUSES)
def test_a_damaged_last_row_is_refused_then_repaired(pg: Pg, other: tuple[str, dict[str, bytes]], status: str) -> None:
    """Each stream damaged under this status (see the module's docstring): refused or going on, the
    doctor's FAIL names --repair, the repair cuts the row (kept aside), the session goes on; the
    other tenant untouched."""
    streams = _streams(status)
    assert streams, f"the sample damages no stream under {status}"
    with ThreadPoolExecutor(max_workers=2) as pool:
        for done in [pool.submit(_case, pg, status, stream, other) for stream in streams]:
            done.result()


def test_a_damaged_row_inside_a_stream_names_a_backup_and_is_left(pg: Pg) -> None:
    """A damaged row with intact rows after it: the doctor FAILs naming a backup, and `--repair`
    changes nothing (every row of the session as it was)."""
    sid = _make(pg, "COMPLETED")
    _flip(pg, sid, "@events", which=3)
    rows = _rows(pg, TENANT, sid)
    doctor = pg.cli("doctor", sid)
    files = [ln for ln in _fails(doctor) if ln.startswith("[FAIL] files:")]
    assert doctor.code == 1 and files and "events.jsonl" in files[0] and "backup" in doctor.out, doctor.out
    fixed = pg.cli("doctor", sid, "--repair")
    assert fixed.code == 1 and "cut the damaged tail" not in fixed.both, fixed.both
    assert _rows(pg, TENANT, sid) == rows
