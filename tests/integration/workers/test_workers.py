"""Celery workers on each real broker (Redis, RabbitMQ): every submitted turn runs exactly once, in
order per session, through worker crashes (SIGKILL), graceful stops (SIGTERM) and redeliveries."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from celery.result import AsyncResult

from agent.core.config import load_settings
from agent.core.errors import BackendUnavailable, SessionNotFound
from agent.runner import AgentRunner
from agent.runner.submit import TurnHandle, handle_for, producer_app, submit_turn
from agent.session.inbox import Inbox, TurnStatus
from tests.support.celery_drill import (
    BROKERS,
    REDIS_URL,
    Cluster,
    check_once_in_order,
    open_cluster,
    sigkill_mid_run,
    submit_sessions,
    turn_script,
)
from tests.support.drills import size
from tests.support.runners import ROOT

N_SESSIONS = 20
KILLS = size("AGENTRT_WORKER_KILLS", sample=2, full=3)
"""SIGKILLs of one worker per broker: two (a worker killed mid-run, and again once restarted) by
default, three with AGENTRT_FULL_DRILLS=1."""
BOUND_S = 150.0
SAME = "Count this once more, please."


@pytest.fixture(params=BROKERS)
def broker(request: pytest.FixtureRequest) -> str:
    """Each test runs once per broker."""
    return str(request.param)


MakeCluster = Callable[..., Cluster]


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    """`make_cluster(broker, tools)`: a cluster whose sessions script three turns of plan / tools / answer."""
    made: list[Cluster] = []

    def make(broker: str, tools: tuple[str, ...] = ("bump",)) -> Cluster:
        made.append(open_cluster(tmp_path, broker, turn_script(3, tools)))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.fixture
def cluster(make_cluster: MakeCluster, broker: str) -> Cluster:
    """Three turns of plan / bump / answer per session."""
    return make_cluster(broker)


@pytest.fixture
def slow_cluster(make_cluster: MakeCluster, broker: str) -> Cluster:
    """Three turns of plan / bump / 3 x 200 ms nap / answer per session: work enough for `KILLS` kills
    while a restarted worker boots on this busy 2-core machine."""
    return make_cluster(broker, ("bump", "nap", "nap", "nap"))


def _texts(sid: str, i: int) -> list[str]:
    if i == 0:
        return [f"Start counting in {sid}.", SAME, SAME]  # the same text twice: two turns
    return [f"Turn {n} of {sid}." for n in (1, 2, 3)]


def _submit_all(c: Cluster) -> tuple[dict[str, list[str]], dict[str, list[TurnHandle]]]:
    """20 sessions x 3 turns from 4 submitting threads at once (each session's turns in order)."""
    texts = {f"s{i:02d}": _texts(f"s{i:02d}", i) for i in range(N_SESSIONS)}
    return texts, submit_sessions(c, texts)


def _check_once_in_order(c: Cluster, texts: dict[str, list[str]], handles: dict[str, list[TurnHandle]]) -> int:
    return check_once_in_order(c, texts, handles, BOUND_S)


def _start_pair(c: Cluster) -> None:
    c.start_worker("w0")
    c.start_worker("w1")


def test_sixty_turns_on_two_workers_run_once_each_in_order(cluster: Cluster) -> None:
    """20 sessions x 3 turns (two identical texts in one) on 2 workers x concurrency 2: once each, in order."""
    c = cluster
    _start_pair(c)
    texts, handles = _submit_all(c)
    assert _check_once_in_order(c, texts, handles) == 0
    for sid in texts:
        assert int(c.redis.get(f"{c.keys}:bump:{sid}") or 0) == 3, sid
    # standard Celery tooling sees the workers (asked by name, it answers once both did, not at its timeout)
    names = ",".join(f"{name}-{c.tenant}@{socket.gethostname()}" for name in c.workers)
    out = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "agent.worker", "inspect", "ping", "--timeout", "5", "-d", names],
        cwd=ROOT, env=c.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.count("pong") == 2, out.stdout + out.stderr


def test_a_worker_sigkilled_again_and_again_loses_no_turn_and_repeats_no_effect(slow_cluster: Cluster) -> None:
    """SIGKILL of a whole worker mid-run, `KILLS` times, each time restarted: same exactly-once, in-order result."""
    c = slow_cluster
    _start_pair(c)
    texts, handles = _submit_all(c)
    sids = sorted(texts)
    sigkill_mid_run(c, "w1", sids, kills=KILLS, bound_s=BOUND_S)
    assert _check_once_in_order(c, texts, handles) >= 1, "no turn was caught mid-run by a kill"
    for sid in sids:
        assert int(c.redis.get(f"{c.keys}:bump:{sid}") or 0) <= 3, sid


def _gated(c: Cluster, sid: str) -> tuple[TurnHandle, int]:
    """Submit one turn whose gate tool blocks; returns the handle and the pool process inside the gate."""
    c.redis.set(f"{c.keys}:gate:{sid}", "closed")
    handle = c.submit(sid, "Pass the gate.")
    deadline = time.monotonic() + BOUND_S
    while not (pid := c.redis.get(f"{c.keys}:reached:{sid}")):
        assert time.monotonic() < deadline, c.log_tail()
        time.sleep(0.05)
    return handle, int(pid)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_sigterm_stops_the_run_at_a_step_boundary_and_another_worker_finishes_it(
    make_cluster: MakeCluster, broker: str
) -> None:
    """SIGTERM: the worker exits within the bound, its turn is requeued and completed by the other worker."""
    c = make_cluster(broker, ("bump", "gate"))
    _start_pair(c)
    handle, child = _gated(c, "s-term")
    owner = next(name for name, p in c.workers.items() if p.pid == _parent(child))
    other = next(name for name in c.workers if name != owner)
    c.signal_worker(owner, signal.SIGTERM)
    t0 = time.monotonic()
    time.sleep(0.5)
    c.redis.delete(f"{c.keys}:gate:s-term")  # the gate step ends; the run stops after it
    assert c.workers[owner].wait(timeout=60) == 0, c.log_tail()
    stopped_in = time.monotonic() - t0
    print(f"[{broker}] SIGTERM: the worker exited {stopped_in - 0.5:.1f} s after the gate opened")
    turn = handle.wait(timeout=BOUND_S)
    assert turn.status is TurnStatus.COMPLETED, (turn.to_json(), c.log_tail())
    assert str(turn.result["worker"]).startswith(f"{other}-"), turn.to_json()
    assert turn.attempts == 2
    assert stopped_in < 30, f"SIGTERM took {stopped_in:.1f} s"
    runner = AgentRunner.from_config(c.config)
    kinds = [e.type for e in runner.manager.event_log(c.tenant, "s-term").entries()]
    assert kinds.count("run_start") == 1 and kinds.count("run_resume") == 1 and kinds.count("run_end") == 1
    assert int(c.redis.get(f"{c.keys}:bump:s-term") or 0) == 1


def test_a_task_redelivered_after_its_turn_finished_does_not_run_it_again(cluster: Cluster) -> None:
    """The worker dies after the turn's end and before the ack: the redelivered task does nothing."""
    c = cluster
    turn_id = f"t-mine-{c.tenant}"  # a caller-given turn id
    c.redis.set(f"{c.keys}:crash-after:{turn_id}", "1")
    c.start_worker("w0")
    handle = c.submit("s-again", "Count once.", turn_id=turn_id)
    assert handle.wait(timeout=BOUND_S).status is TurnStatus.COMPLETED
    assert c.workers["w0"].wait(timeout=60) == -signal.SIGKILL  # died before acknowledging
    c.start_worker("w0")
    deadline = time.monotonic() + BOUND_S
    while int(c.redis.get(f"{c.keys}:executions:{turn_id}") or 0) < 2:
        assert time.monotonic() < deadline, f"the task was not delivered again\n{c.log_tail()}"
        time.sleep(0.1)
    assert not c.redis.exists(f"{c.keys}:crash-after:{turn_id}")  # the crash did happen
    result = AsyncResult(turn_id, app=producer_app(c.settings)).get(timeout=BOUND_S)
    assert result["status"] == "COMPLETED" and result["turn_id"] == turn_id
    kinds = [r["kind"] for r in c.inbox("s-again").records()]
    assert kinds == ["submitted", "started", "done"]
    runner = AgentRunner.from_config(c.config)
    events = [e.type for e in runner.manager.event_log(c.tenant, "s-again").entries()]
    assert events.count("run_start") == 1 and events.count("run_resume") == 0
    assert int(c.redis.get(f"{c.keys}:bump:s-again") or 0) == 1


def test_a_turn_paused_for_approval_ends_its_task_and_resume_approve_queues_the_rest(make_cluster: MakeCluster) -> None:
    """The paused turn settles as PAUSED, the next turn waits; `agentrt resume --approve` continues both."""
    c = make_cluster("redis", ("bump_approved",))
    c.start_worker("w0")
    first = c.submit("s-ask", "Bump after asking.")
    second = c.submit("s-ask", "And once more.")
    assert first.wait(timeout=BOUND_S).status is TurnStatus.PAUSED
    time.sleep(1.0)
    assert second.status() is TurnStatus.PENDING
    env = {**c.env, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "agent.cli", "resume", "s-ask", "--approve", "--config", str(c.config)]
    out = subprocess.run(
        [*cmd, "--tenant", c.tenant], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0 and f"queued: {first.turn_id}" in out.stdout, out.stdout + out.stderr
    assert first.wait(timeout=BOUND_S).status is TurnStatus.COMPLETED
    turn = second.wait(timeout=BOUND_S)
    assert turn.status is TurnStatus.PAUSED  # its own bump asks too
    assert int(c.redis.get(f"{c.keys}:bump:s-ask") or 0) == 1


def test_submit_and_wait_on_the_command_line(make_cluster: MakeCluster) -> None:
    """`agentrt submit` prints a turn id; `agentrt wait` prints the answer; a reused turn id is refused."""
    c = make_cluster("redis")
    c.start_worker("w0", concurrency=1)
    env = {**c.env, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "agent.cli"]
    opts = ["--config", str(c.config), "--tenant", c.tenant]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args, *opts], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    sub = cli("submit", "--new-session", "s-cli", "--turn-id", "t-cli-1", "Count", "for", "me.")
    assert sub.returncode == 0 and sub.stdout.strip() == "t-cli-1", sub.stdout + sub.stderr
    again = cli("submit", "--session", "s-cli", "--turn-id", "t-cli-1", "Again.")
    assert again.returncode == 2 and "was used before" in again.stdout + again.stderr
    done = cli("wait", "t-cli-1", "--timeout", "120")
    assert done.returncode == 0 and "COMPLETED" in done.stdout and "Answer 1." in done.stdout, done.stdout
    missing = cli("wait", "t-nope", "--timeout", "1")
    assert missing.returncode == 3 and "no turn t-nope" in missing.stdout + missing.stderr  # 3: not found


def test_a_turn_for_another_users_session_fails_with_a_clear_error(make_cluster: MakeCluster) -> None:
    """A second user of the same tenant cannot add turns to the first user's session through the queue."""
    c = make_cluster("redis")
    c.start_worker("w0", concurrency=1)
    mine = submit_turn(c.settings, "Count for alice.", "s-alice", c.tenant, "alice", new_session=True)
    assert mine.wait(timeout=BOUND_S).status is TurnStatus.COMPLETED
    # Refused at submit (nothing queued), in the words of a session that does not exist.
    with pytest.raises(SessionNotFound, match=r"no session s-alice for tenant \S+ and user bob"):
        submit_turn(c.settings, "Count for bob.", "s-alice", c.tenant, "bob")
    assert [t.user_id for t in c.inbox("s-alice").turns()] == ["alice"]
    assert handle_for(c.settings, mine.turn_id, c.tenant, "alice").wait(timeout=1).status is TurnStatus.COMPLETED
    with pytest.raises(SessionNotFound, match=r"no turn \S+ of user bob"):
        handle_for(c.settings, mine.turn_id, c.tenant, "bob")
    assert int(c.redis.get(f"{c.keys}:bump:s-alice") or 0) == 1


def test_a_broker_that_is_down_is_a_storage_error_and_the_turn_stays_recorded(tmp_path: Path) -> None:
    """The inbox keeps the turn (it runs with the session's next one); the one-line error says what to check."""
    settings = load_settings(
        None,
        overrides={
            "persistence.base_dir": str(tmp_path),
            "workers.broker_url": "redis://127.0.0.1:1/0",  # nothing listens there
            "workers.result_backend": f"{REDIS_URL}/0",
        },
    )
    with pytest.raises(BackendUnavailable, match="did not take its task"):
        submit_turn(settings, "hello", "s1", turn_id="t-down", new_session=True)
    assert [t.turn_id for t in Inbox(settings.base_dir, settings.session.tenant_id, "s1").turns()] == ["t-down"]


def test_a_turn_submitted_after_a_fork_runs_on_the_new_branch(make_cluster: MakeCluster) -> None:
    """Fork a worker-run session at its first turn's end; the next submitted turn continues the branch."""
    c = make_cluster("redis")
    c.start_worker("w0", concurrency=1)
    assert c.submit("s-fork", "First.").wait(timeout=BOUND_S).status is TurnStatus.COMPLETED
    runner = AgentRunner.from_config(c.config)
    events = runner.manager.event_log(c.tenant, "s-fork").entries()
    end = next(e for e in events if e.type == "run_end")
    fork = runner.fork("s-fork", end.id, tenant_id=c.tenant)
    turn = c.submit("s-fork", "Second, on the branch.").wait(timeout=BOUND_S)
    assert turn.status is TurnStatus.COMPLETED and turn.result.get("answer") == "Answer 2.", turn.to_json()
    runner.manager.l1.delete(c.tenant, "s-fork")
    entries = runner.manager.event_log(c.tenant, "s-fork").entries()
    asked = [(e.branch_id, e.payload["content"]) for e in entries if e.type == "user_turn"]
    assert asked == [("main", "First."), (fork["branch_id"], "Second, on the branch.")]
