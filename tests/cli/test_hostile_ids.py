"""Hostile ids through the installed `agentrt`, from a fresh directory with the built-in default config.

Every id a command takes (session, entry, call, branch, approval, turn, tenant, user) given as an
escape sequence, a C1 control, a newline, a carriage return, 10,000 characters, nothing, `../x`,
U+202E or U+2028: exit 2 with one short `agentrt: error:` line in which no control, format or
separator character is raw, and no file appears. A well-formed id that names nothing: exit 3, and
still no file. A NUL cannot be passed in argv (the kernel ends each argument at it): it arrives
through the HTTP API of `agentrt serve`, tested at the end.

Every command meets every kind: a refused id exits before any store is opened, so each of the
~230 processes takes a fraction of a second; they run a few at a time, each in a folder of its own.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from checkpointing.ids import UNSAFE_CATEGORIES
from tests.cli.console import ROOT, Ran, agentrt, env, script
from tests.support.serve import free_port

HOSTILE = {
    "esc": "\x1b[31mX\x1b[0m",
    "c1_csi": "\x9b31m",
    "newline": "a\nb",
    "carriage_return": "a\rb",
    "long": "a" * 10_000,
    "empty": "",
    "dotdot": "../x",
    "rlo": "a\u202eb",
    "line_separator": "a\u2028b",
}
MAX_ERROR_CHARS = 300
AT_ONCE = 4
"""Commands of the id tests run at a time (each is short and independent; most of its time is the
interpreter starting)."""

# Each place a command takes an id: ID is the hostile value; S, E and C are a real session, one of
# its entries and one of its call ids (so only the hostile one can be wrong).
SLOTS = {
    "show": ["show", "ID"],
    "show --branch": ["show", "S", "--branch", "ID"],
    "show --tenant": ["show", "S", "--tenant", "ID"],
    "show --user": ["show", "S", "--user", "ID"],
    "resume": ["resume", "ID"],
    "resume --interrupt": ["resume", "S", "--approve", "--interrupt", "ID"],
    "pause": ["pause", "ID"],
    "end": ["end", "ID"],
    "fork": ["fork", "ID", "--from", "E"],
    "fork --from": ["fork", "S", "--from", "ID"],
    "tool-result": ["tool-result", "ID", "C"],
    "tool-result CALL_ID": ["tool-result", "S", "ID"],
    "doctor": ["doctor", "ID"],
    "doctor --repair": ["doctor", "ID", "--repair"],
    "run --session": ["run", "--session", "ID", "hi"],
    "run --new-session": ["run", "--new-session", "ID", "hi"],
    "sessions --tenant": ["sessions", "--tenant", "ID"],
    "sessions --user": ["sessions", "--user", "ID"],
    "wait": ["wait", "ID"],
    "submit --session": ["submit", "--session", "ID", "hi"],
    "submit --turn-id": ["submit", "--session", "S", "--turn-id", "ID", "hi"],
    "export": ["export", "ID"],
    "export --tenant": ["export", "S", "--tenant", "ID"],
}
# A well-formed id that names nothing: not found. (`sessions --tenant` lists no sessions; `submit`
# needs a broker, absent from the default config.)
UNKNOWN = {
    "show": "s-nothere",
    "show --branch": "b-nothere",
    "show --tenant": "t-nothere",
    "show --user": "u-nothere",
    "resume": "s-nothere",
    "resume --interrupt": "i-nothere",
    "pause": "s-nothere",
    "end": "s-nothere",
    "fork": "s-nothere",
    "fork --from": "0190aaaa-0000-7000-8000-000000000000",
    "tool-result": "s-nothere",
    "tool-result CALL_ID": "call_nothere",
    "doctor": "s-nothere",
    "doctor --repair": "s-nothere",
    "run --session": "s-nothere",
    "wait": "t-nothere",
    "export": "s-nothere",
    "export --tenant": "t-nothere",
}


def _cases() -> list[tuple[str, str]]:
    return [(slot, kind) for slot in SLOTS for kind in HOSTILE]


def raw_unsafe(text: str) -> list[str]:
    """The characters of `text` a terminal would act on (a newline ends a line: allowed)."""
    return [repr(c) for c in text if c != "\n" and unicodedata.category(c) in UNSAFE_CATEGORIES]


def files(root: Path) -> set[str]:
    """Every path under `root`."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A directory with one COMPLETED demo session: its id, first entry and first call id."""
    work = tmp_path_factory.mktemp("hostile")
    ran = agentrt("run", "--approve-all", "--json", "Summarise the 2026 sales by region", cwd=work)
    assert ran.code == 0, ran.both
    sid = json.loads(ran.out)["session_id"]
    shown = json.loads(agentrt("show", sid, "--json", "--last", "200", cwd=work).out)
    entries = [e for e in shown["entries"] if e["type"] == "user_turn"]
    calls = [
        re.findall(r'"tool_call_id": "([^"]+)"', e["summary"]) for e in shown["entries"] if e["type"] == "tool_result"
    ]
    assert entries and calls and calls[0], shown
    return {"dir": str(work), "S": sid, "E": entries[0]["id"], "C": calls[0][0]}


def _run(demo: dict[str, str], slot: str, value: str, work: Path | None = None) -> tuple[Ran, set[str]]:
    """The command of `slot` with `value` as its id, in `work` (a copy of the demo folder) or the demo
    folder; the paths it added under that folder."""
    work = work or Path(demo["dir"])
    args = [value if a == "ID" else demo.get(a, a) if a in ("S", "E", "C") else a for a in SLOTS[slot]]
    before = files(work)
    ran = agentrt(*args, cwd=work)
    return ran, files(work) - before


def _in_empty_folder(slot: str, work: Path) -> tuple[Ran, set[str]]:
    """The command of `slot` on ids that name nothing, in the empty folder `work`; every path in it after."""
    stand_in = {"S": "s-nothere", "E": UNKNOWN["fork --from"], "C": "call_nothere", "ID": UNKNOWN[slot]}
    return agentrt(*[stand_in.get(a, a) for a in SLOTS[slot]], cwd=work), files(work)


Outcome = tuple[Ran, set[str]]


@pytest.fixture(scope="module")
def ahead(
    demo: dict[str, str], request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, ...], Future[Outcome]]]:
    """The commands of the three id tests below that this session selected, started a few at a
    time when the first of those tests runs, each in a folder of its own (a fresh copy of the demo
    folder, or an empty one), so what a command made is its own. Keyed by (test name, its params)."""
    jobs: dict[tuple[str, ...], Callable[[], Outcome]] = {}
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if getattr(item, "module", None) is not request.module or spec is None:
            continue
        name, slot, kind = item.originalname, spec.params["slot"], spec.params.get("kind", "")
        work = tmp_path_factory.mktemp("case")
        if name == "test_an_id_that_can_never_be_valid_is_refused_briefly_and_safely":
            shutil.copytree(demo["dir"], work, dirs_exist_ok=True)
            jobs[(name, slot, kind)] = partial(_run, demo, slot, HOSTILE[kind], work)
        elif name == "test_a_well_formed_id_that_names_nothing_is_not_found_and_leaves_nothing":
            shutil.copytree(demo["dir"], work, dirs_exist_ok=True)
            jobs[(name, slot)] = partial(_run, demo, slot, UNKNOWN[slot], work)
        elif name == "test_a_command_that_fails_in_an_empty_directory_creates_nothing":
            jobs[(name, slot)] = partial(_in_empty_folder, slot, work)
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        yield {key: pool.submit(job) for key, job in jobs.items()}


def _outcome(ahead: dict[tuple[str, ...], Future[Outcome]], key: tuple[str, ...]) -> Outcome:
    return ahead[key].result(timeout=600)


@pytest.mark.parametrize(("slot", "kind"), _cases())
def test_an_id_that_can_never_be_valid_is_refused_briefly_and_safely(ahead, slot: str, kind: str):
    """Exit 2, one `agentrt: error:` line under 300 characters naming the id's kind, nothing raw, nothing made."""
    ran, made = _outcome(ahead, ("test_an_id_that_can_never_be_valid_is_refused_briefly_and_safely", slot, kind))
    assert ran.code == 2, ran.both
    line = ran.error_line()
    assert len(line) < MAX_ERROR_CHARS, line
    assert " id " in line or "id must not be empty" in line, line
    if kind == "empty":
        assert "must not be empty" in line, line
    assert not raw_unsafe(ran.both), ran.both
    assert not ran.out
    assert not made, made


@pytest.mark.parametrize("slot", sorted(UNKNOWN))
def test_a_well_formed_id_that_names_nothing_is_not_found_and_leaves_nothing(ahead, slot: str):
    """Exit 3 with one line naming the id; no file appears (no lease or fence files for a session
    that never existed)."""
    ran, made = _outcome(ahead, ("test_a_well_formed_id_that_names_nothing_is_not_found_and_leaves_nothing", slot))
    assert ran.code == 3, ran.both
    line = ran.error_line()
    assert UNKNOWN[slot] in line and len(line) < MAX_ERROR_CHARS, line
    assert not made, made


@pytest.mark.parametrize("slot", sorted(UNKNOWN))
def test_a_command_that_fails_in_an_empty_directory_creates_nothing(ahead, slot: str):
    """Where no store exists yet, a command on an id that names nothing exits 3 and leaves the
    directory empty: no `.agentrt/`, no database, no migration lock."""
    ran, left = _outcome(ahead, ("test_a_command_that_fails_in_an_empty_directory_creates_nothing", slot))
    assert ran.code == 3, ran.both
    assert "s-nothere" in ran.error_line() or UNKNOWN[slot] in ran.error_line()
    assert left == set()


def test_listing_sessions_in_an_empty_directory_creates_nothing(tmp_path: Path):
    """`agentrt sessions` where nothing ran yet says there are none and makes no store."""
    ran = agentrt("sessions", cwd=tmp_path)
    assert ran.code == 0 and ran.out.startswith("no sessions"), ran.both
    assert files(tmp_path) == set()


def test_after_refused_pause_end_fork_the_doctor_does_not_see_a_session(demo: dict[str, str]):
    """pause, end and fork of an unknown session leave no folder the doctor could take for one."""
    for slot in ("pause", "end", "fork"):
        assert _run(demo, slot, "s-never")[0].code == 3
    doctor = agentrt("doctor", "s-never", cwd=Path(demo["dir"]))
    assert doctor.code == 3 and "[FAIL]" not in doctor.out, doctor.both
    assert not (Path(demo["dir"]) / ".agentrt/tenants/default/sessions/s-never").exists()


def test_hostile_text_is_escaped_for_humans_and_exact_in_json(tmp_path: Path):
    """A turn's text with terminal escapes: `show` prints it escaped; `show --json` holds it exactly,
    JSON-escaped (no raw control or format character on stdout)."""
    text = "Summarise \x1b]0;pwned\x07 the \x9b2J sales \u202eby region\u2028now\r"
    ran = agentrt("run", "--json", text, cwd=tmp_path)
    assert ran.code == 0, ran.both
    assert not raw_unsafe(ran.out), ran.out
    sid = json.loads(ran.out)["session_id"]
    human = agentrt("show", sid, cwd=tmp_path)
    assert human.code == 0, human.both
    assert not raw_unsafe(human.both), human.both
    assert "Summarise \\x1b]0;pwned\\x07 the \\x9b2J sales \\u202eby region\\u2028now\\x0d" in human.out
    machine = agentrt("show", sid, "--json", "--last", "200", cwd=tmp_path)
    assert not raw_unsafe(machine.out), machine.out
    said = [m["content"] for m in json.loads(machine.out)["session"]["messages"] if m["role"] == "user"]
    assert said == [text]
    listed = agentrt("sessions", cwd=tmp_path)
    assert sid in listed.out and not raw_unsafe(listed.both), listed.both
    logged = agentrt("show", sid, cwd=tmp_path, extra_env={"AGENTRT_LOG": "text", "AGENTRT_LOG_LEVEL": "DEBUG"})
    assert not raw_unsafe(logged.err), logged.err


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """`agentrt serve` (the built-in defaults) in a fresh directory; its URL."""
    port = free_port()
    log = (tmp_path / "serve.log").open("ab")
    proc = subprocess.Popen(
        [script(), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env(),
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_a_nul_or_control_in_an_http_id_is_refused_safely(server: str, tmp_path: Path):
    """argv cannot carry a NUL, HTTP can: thread ids with NUL, ESC, U+202E or 10,000 characters, in a
    path or a body, are answered 4xx with a short message holding none of them raw; nothing is made."""
    before = files(tmp_path)
    for bad in ("a\x00b", "\x1b[31mX", "a\u202eb", "a" * 10_000):
        path = quote(bad, safe="")  # percent-encoded: %00, %1B, %E2%80%AE
        for reply in (
            httpx.get(f"{server}/threads/{path}"),
            httpx.get(f"{server}/ui/sessions/{path}"),
            httpx.post(f"{server}/threads", json={"thread_id": bad}),
        ):
            assert 400 <= reply.status_code < 500, (bad[:20], reply.status_code, reply.text[:300])
            assert not raw_unsafe(reply.text), reply.text[:300]
            assert bad not in reply.text
            if reply.headers.get("content-type", "").startswith("application/json"):
                assert len(reply.json()["detail"]) < MAX_ERROR_CHARS, reply.text[:400]
    made = {p for p in files(tmp_path) - before if not p.startswith("serve.log")}
    assert not {p for p in made if "/sessions/" in p}, made


PG = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"


def _psql(sql: str) -> str:
    argv = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-Atqc", sql]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def _rows(schema: str) -> dict[str, str]:
    """The row count of every table in `schema` (one query: a table made meanwhile is counted too)."""
    counted = _psql(
        "SELECT tablename, (xpath('/row/c/text()', query_to_xml("
        "format('SELECT count(*) AS c FROM %I.%I', schemaname, tablename), false, true, '')))[1]::text "
        f"FROM pg_tables WHERE schemaname = '{schema}'"
    )
    return dict(line.split("|", 1) for line in counted.splitlines())


def test_production_config_makes_no_key_row_or_file_for_a_refused_command(tmp_path: Path):
    """With Redis (L2, lease, broker) and PostgreSQL (L3): unknown or hostile ids in every command that
    takes a session leave no Redis key, no SQL row and no file."""
    import redis

    tag = uuid.uuid4().hex[:10]
    schema, tenant = f"cli_ids_{tag}", f"t-ids-{tag}"
    config = str(ROOT / "configs/production.yaml")
    extra = {
        "AGENTRT_DATABASE_URL": f"{PG}?options=-csearch_path%3D{schema}",
        "AGENTRT_REDIS_URL": REDIS,
        "AGENTRT_BASE_DIR": str(tmp_path / "volume"),
    }
    client = redis.Redis.from_url(REDIS)
    _psql(f"CREATE SCHEMA {schema}")
    try:
        assert agentrt("db", "init", "--config", config, cwd=tmp_path, extra_env=extra).code == 0

        def state() -> tuple[set[bytes], dict[str, str], set[str]]:
            keys = set(client.scan_iter(match=f"*{tenant}*", count=500)) | set(client.scan_iter(match="*s-never*"))
            return keys, _rows(schema), files(tmp_path)

        before = state()
        assert before[1], "db init made no tables"
        for args, code in (
            (["show", "s-never"], 3),
            (["resume", "s-never"], 3),
            (["resume", "s-never", "--approve"], 3),
            (["pause", "s-never"], 3),
            (["end", "s-never"], 3),
            (["fork", "s-never", "--from", "0190aaaa-0000-7000-8000-000000000000"], 3),
            (["doctor", "s-never", "--repair"], 3),
            (["tool-result", "s-never", "call_1"], 3),
            (["run", "--session", "s-never", "hi"], 3),
            (["submit", "--session", "s-never", "hi"], 3),
            (["wait", "t-never"], 3),
            (["pause", "\x1b[31mX"], 2),
            (["submit", "--session", "", "hi"], 2),
            (["run", "--session", "a" * 10_000, "hi"], 2),
        ):
            ran = agentrt(*args, "--config", config, "--tenant", tenant, cwd=tmp_path, extra_env=extra)
            assert ran.code == code, (args[:3], ran.both)
            assert len(ran.error_line()) < MAX_ERROR_CHARS and not raw_unsafe(ran.both), ran.both
            assert state() == before, args[:3]
    finally:
        _psql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        keys = list(client.scan_iter(match=f"*{tenant}*", count=500))
        if keys:
            client.delete(*keys)
