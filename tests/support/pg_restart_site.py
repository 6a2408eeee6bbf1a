"""The PostgreSQL-restart drill (tests/integration/store/test_pg_restart.py, test_pg_crash_points.py):
a private server with a config on it, sessions whose turns run under a disruption, and the checks
of a session's records afterwards."""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import load_settings
from agent.runner import AgentRunner
from agent.session.record_store import blobs, close_stores, session_streams
from agent.tools.journal import ToolExecutionJournal
from tests.support.celery_drill import turn_script
from tests.support.crash import child_env, counter_lines, run_cli
from tests.support.pg_server import PgServer, env_of, private_postgres
from tests.support.runners import make_config
from tests.support.zygote import Outcome, Zygote

TURNS = 1 + 6  # the first, undisturbed, and one per PLAN entry
NAP_S = 0.15
CALLS: dict[int, list[tuple[str, dict[str, Any]]]] = {
    n: [("bump", {"label": f"t{n}-a"}), ("nap", {"seconds": NAP_S}), ("bump", {"label": f"t{n}-b"})]
    for n in range(1, TURNS + 1)
}
TOOLS: dict[str, list[Any]] = {
    "builtins": ["read_file"],
    "custom": [
        {"path": "tests.support.drill_tools:bump", "effect": "unsafe"},
        {"path": "tests.support.serve_tools:nap", "effect": "read_only"},
    ],
}
BACKEND_DOWN = 6  # README, "Errors and exit status": BackendUnavailable
BUSY = 4  # the lease of the failed run is still held until it lapses (lease_ttl_s)
OUTAGE_S = 2.0
PAGE_LINES = ("user>", "answer>")
"""How `agentrt show` starts a question's and an answer's line."""


@dataclass
class Site:
    """The private server, a config on it (schema made by `agentrt db init`), the test's tmp, and
    the fork server every `agentrt` command of the module runs from (the import paid once)."""

    pg: PgServer
    config: Path
    tmp: Path
    zygote: Zygote


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One private server for the module, its database made as a user makes it."""
    tmp = tmp_path_factory.mktemp("pg-restart")
    (tmp / "zygote").mkdir()
    # Commits that do not wait for the WAL flush (the event log's, between steps) stay unflushed for
    # up to 10 s instead of 0.2 s: a crash restart loses them all, as a crash at the worst instant would.
    with private_postgres({"wal_writer_delay": "10s"}) as pg:
        config = make_config(
            tmp,
            turn_script(TURNS, (), CALLS),
            persistence={
                "mode": "PRIMARY",
                "store": "postgres",
                "lease": "postgres",
                "lease_ttl_s": 2.0,
                "database_url": pg.url("agentrt"),
                "redis_url": None,
            },
            tools=TOOLS,
            datasets=[],
            skills_dir=None,
        )
        init = run_cli(["db", "init", "--config", str(config)], child_env(tmp / "unused"))
        assert init.code == 0, init.stdout + init.stderr
        try:
            with Zygote(tmp / "zygote") as zygote:
                yield Site(pg, config, tmp, zygote)
        finally:
            close_stores()  # this process's pool on the server, before it goes


@dataclass
class Turn:
    """What happened to one turn: the run the server went down under, then what the user did."""

    n: int
    when: str
    """When the server went down (for messages)."""
    run: Outcome
    steps: list[str] = field(default_factory=list)

    def story(self) -> str:
        """For assertion messages."""
        return f"turn {self.n} (server down {self.when}): exit {self.run.code}; " + " -> ".join(self.steps)


@dataclass
class Session:
    """One session of a drill: its id, its counter file, and its turns."""

    site: Site
    sid: str
    turns: list[Turn] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """The environment of every command of this session."""
        return child_env(self.site.tmp / f"{self.sid}.counter", **env_of(self.site.pg))

    def cli(self, *args: str) -> Outcome:
        """`agentrt ARGS --config F`, to its end."""
        return self.site.zygote.run([*args, "--config", str(self.site.config)], self.env)

    def first_turn(self) -> str:
        """Turn 1, undisturbed; its run id."""
        done = self.cli("run", "--new-session", self.sid, "--json", "Question 1?")
        assert done.code == 0 and done.json()["answer"] == "Answer 1.", done.stdout + done.stderr
        return str(done.json()["run_id"])

    def turn_under(
        self,
        n: int,
        when: str,
        ready: Callable[[list[str]], bool],
        disrupt: Callable[[PgServer], None],
        recover: bool = True,
    ) -> Turn:
        """Turn n as `agentrt run`; `disrupt(pg)` once `ready(stderr lines so far)` (or once the
        command ended); then (`recover`) the user's recovery until the turn's answer is there."""
        zygote = self.site.zygote
        argv = ["run", "--session", self.sid, "--config", str(self.site.config), f"Question {n}?"]
        pid = zygote.spawn(argv, self.env)
        err = zygote.last_files[1]
        while not ready(_lines(err)) and _alive(pid):
            time.sleep(0.005)
        disrupt(self.site.pg)
        turn = Turn(n, when, zygote.wait())
        self.turns.append(turn)
        if recover:
            self.recover(turn)
        return turn

    def recover(self, turn: Turn) -> None:
        """What a user does after the command: nothing (it answered), else what its error says."""
        run, want = turn.run, f"Answer {turn.n}."
        said = turn.story() + "\n" + run.stderr
        assert "Traceback" not in run.stderr and not any(words in run.stderr for words in POOL_CHATTER), said
        if run.code == 0:
            assert run.stdout.splitlines()[:1] == [want], turn.story() + "\n" + run.stdout
            return
        assert run.code == BACKEND_DOWN, said
        errors = [line for line in run.stderr.splitlines() if line.startswith("agentrt: error: ")]
        assert len(errors) == 1 and run.stderr.rstrip("\n").endswith(errors[0]), said
        assert "postgresql:" in errors[0], said  # names the database (or the stream) that failed
        if "agentrt resume" in errors[0]:
            resumed = self._until_free("resume", self.sid, "--json")
            turn.steps.append(f"resume: exit {resumed.code}")
            assert resumed.code == 0, turn.story() + "\n" + resumed.stdout + resumed.stderr
            if resumed.json()["answer"] == want:
                return
        # Never recorded (the resume finished nothing of it, or the error said to retry): ask again.
        again = self._until_free("run", "--session", self.sid, "--json", f"Question {turn.n}?")
        turn.steps.append(f"run again: exit {again.code}")
        assert again.code == 0 and again.json()["answer"] == want, turn.story() + "\n" + again.stdout + again.stderr

    def _until_free(self, *args: str) -> Outcome:
        """The command; while the failed run's lease has not lapsed yet (LeaseHeld: exit 4 naming
        its expiry), again once it has, as its message says (bounded)."""
        for _ in range(10):
            done = self.cli(*args)
            held = LEASE_HELD.search(done.stderr)
            if done.code != BUSY or held is None:
                return done
            time.sleep(max(0.0, datetime.fromisoformat(held.group(1)).timestamp() - time.time()) + 0.1)
        raise AssertionError(f"session {self.sid} still held: {done.stderr}")


LEASE_HELD = re.compile(r" is held by .* \(lease expires at (\S+)\)")
"""`LeaseHeld`'s message, with the lease's expiry."""


POOL_CHATTER = ("discarding closed connection", "error connecting in")
"""The connection pool's own log lines: a command that fails says so in its one error line instead."""


def _lines(path: Path) -> list[str]:
    """The whole lines a running command wrote to `path` so far."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return text.splitlines()[: text.count("\n")]


def _alive(pid: int) -> bool:
    """Whether the forked command still runs (until the fork server reaps it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def at_line(k: int) -> Callable[[list[str]], bool]:
    """Ready once the command printed `k` progress lines."""
    return lambda lines: len(lines) >= k


def crash_restart(pg: PgServer) -> None:
    """The server dies (every process killed, nothing flushed) and starts again (WAL recovery)."""
    pg.restart("immediate")


def clean_restart(pg: PgServer) -> None:
    """The server disconnects everyone, shuts down cleanly, starts again."""
    pg.restart("fast")


def outage(pg: PgServer) -> None:
    """The server is down for a few seconds."""
    pg.stop("fast")
    time.sleep(OUTAGE_S)
    pg.start()


# -- what the session must look like afterwards ---------------------------------------------------


def check_session(session: Session) -> None:
    """Every turn answered once, in order; nothing lost or doubled in the log, the journal, the
    side effects; `show` and `doctor` agree."""
    n_turns = 1 + len(session.turns)
    story = "\n".join(t.story() for t in session.turns)
    said = [x for n in range(1, n_turns + 1) for x in (f"Question {n}?", f"Answer {n}.")]

    close_stores()  # this process's pool: its connections may predate a restart
    shown = session.cli("show", session.sid)
    assert shown.code == 0, shown.stderr
    listed = [line.split("> ", 1)[1] for line in shown.stdout.splitlines() if line.lstrip().startswith(PAGE_LINES)]
    assert listed == said, story + "\n" + shown.stdout

    settings = load_settings(session.site.config)
    tenant = settings.session.tenant_id
    runner = AgentRunner.from_config(session.site.config)
    entries = runner.manager.event_log(tenant, session.sid).entries()
    seen: set[str] = set()
    for before, e in zip([None, *entries], entries, strict=False):  # one chain, in id (time) order
        assert e.parent_id is None or e.parent_id in seen, f"{story}\nentry {e.id} ({e.type}) has no parent"
        assert before is None or e.id > before.id, f"{story}\nentry {e.id} out of order"
        seen.add(e.id)
    for kind in ("run_start", "run_end"):
        runs = Counter(str(e.payload.get("run_id")) for e in entries if e.type == kind)
        assert set(runs.values()) == {1}, f"{story}\n{kind} twice: {runs}"
    texts = [e.payload.get("content") for e in entries if e.type in ("user_turn", "assistant_message")]
    assert texts == said, f"{story}\n{texts}"

    streams = session_streams(settings, tenant, session.sid)
    assert streams is not None  # store: postgres
    journal = ToolExecutionJournal.over(streams, blobs(settings))
    wrong = [a for a in journal.duplicates() if a.kind != "intent_without_end"]  # unknown: reported as such
    assert wrong == [], f"{story}\n{wrong}"

    bumped = Counter(counter_lines(session.site.tmp / f"{session.sid}.counter"))
    assert set(bumped.values()) == {1}, f"{story}\nan unsafe call ran twice: {bumped}"
    outcomes = bump_outcomes(runner.state(session.sid)["messages"])
    assert set(outcomes) == {f"t{n}-{x}" for n in range(1, n_turns + 1) for x in "ab"}, f"{story}\n{outcomes}"
    for label, outcome in outcomes.items():
        if outcome.startswith("bumped"):  # the model was told it ran: it did, once
            assert bumped[label] == 1, f"{story}\n{label}: {outcome}, counter {bumped}"
        else:  # the model was told the outcome is unknown: it ran at most once (checked above)
            assert outcome.startswith("Outcome unknown") and "NOT run again" in outcome, f"{story}\n{outcome}"
    assert set(bumped) <= set(outcomes), f"{story}\n{bumped} vs {outcomes}"

    close_stores()
    doctor = session.cli("doctor", session.sid)
    assert doctor.code == 0 and "[FAIL]" not in doctor.stdout, story + "\n" + doctor.stdout + doctor.stderr


def bump_outcomes(messages: list[Any]) -> dict[str, str]:
    """{bump label: what the model was told} from the session's messages."""
    labels = {
        call["id"]: call["args"]["label"]
        for m in messages
        for call in getattr(m, "tool_calls", None) or []
        if call["name"] == "bump"
    }
    return {labels[m.tool_call_id]: str(m.content) for m in messages if getattr(m, "tool_call_id", None) in labels}
