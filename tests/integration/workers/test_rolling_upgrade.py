"""A rolling upgrade on real Celery workers (on RabbitMQ, and on Redis as the broker): workers of two
graph versions side by side.

Worker "wa" runs the current graph, worker "wb" a graph with one more node (another GRAPH_VERSION,
tests/support/hooked_celery.py). Every turn pauses for approval, so its approval resumes the run
from its checkpoint: a worker of the other version would refuse it (RECOVERY_BLOCKED). On the
files store (one shared base_dir) with each broker, and on the postgres store, where each worker has
its own base_dir and routing reads the session's graph version from PostgreSQL.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import graph.build
from agent.doctor import Check, run_doctor
from agent.doctor.index import store_report
from agent.runner import AgentRunner
from agent.runner.routing import session_graph_version
from agent.runner.submit import TurnHandle, submit_decision
from agent.session.inbox import Turn, TurnStatus
from tests.support.celery_drill import BROKERS, Cluster, open_cluster, turn_script
from tests.support.hooked_celery import hooked_version

BOUND_S = 90.0
APPROVE = {"approved": True, "reason": "drill"}


@pytest.fixture(params=[*((b, "files") for b in BROKERS), ("redis", "postgres")], ids=lambda p: "-".join(p))
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A cluster (its own names) whose turns each ask to approve one tool call: each broker on the
    files store, and the postgres store (a fleet with no shared files)."""
    broker, store = request.param
    c = open_cluster(tmp_path, broker, turn_script(4, ("bump_approved",)), store=store)
    yield c
    c.close()


def _approved(c: Cluster, handle: TurnHandle) -> Turn:
    """Wait for the turn's pause, approve it (queued like `agentrt resume --approve`), wait for its end."""
    paused = handle.wait(timeout=BOUND_S)
    assert paused.status is TurnStatus.PAUSED, (paused.to_json(), c.log_tail())
    submit_decision(c.settings, handle.session_id, APPROVE, c.tenant)
    done = handle.wait(timeout=BOUND_S)
    assert done.status is TurnStatus.COMPLETED, (done.to_json(), c.log_tail())
    return done


def _first_turn(c: Cluster, sid: str) -> Turn:
    return _approved(c, c.submit(sid, f"Start {sid}."))


def _stop(c: Cluster, name: str) -> None:
    c.signal_worker(name, signal.SIGTERM)
    assert c.workers[name].wait(timeout=60) == 0, c.log_tail()


def _on_the_shared_queue(c: Cluster, monkeypatch: pytest.MonkeyPatch, sid: str, text: str) -> TurnHandle:
    """A turn sent to the shared queue, as an agentrt from before routing by graph version sent every turn."""
    with monkeypatch.context() as m:
        m.setattr("agent.runner.submit.turn_queue", lambda settings, tenant, session: settings.workers.queue)
        return c.submit(sid, text)


def _doctor(c: Cluster, sid: str) -> Check:
    return run_doctor(AgentRunner.from_config(c.config), sid, c.tenant).check("worker_queue")


def test_each_session_runs_only_on_workers_of_its_graph_version(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions of both versions take turns while both versions' workers run; a turn whose version
    has no worker stays queued until one starts, even one sent to the shared queue; no run is blocked."""
    c = cluster
    old, new = graph.build.GRAPH_VERSION, hooked_version()
    assert old != new
    version_of = {"wa": old, "wb": new}

    c.start_worker("wa", concurrency=1)  # before the upgrade: the current version only
    for sid in ("a0", "a1"):
        _first_turn(c, sid)
    _stop(c, "wa")
    c.start_worker("wb", concurrency=1, other_graph=True)  # the new version
    for sid in ("b0", "b1"):
        _first_turn(c, sid)
    for sid in ("a0", "a1", "b0", "b1"):
        assert session_graph_version(c.settings, c.tenant, sid) == (old if sid < "b" else new), sid

    # No worker of the old version runs: a0's turn waits in its queue; a1's, sent to the shared
    # queue, is passed on there untouched by the new worker, which runs b0's turn submitted after
    # them and a new session's first turn (after a1's on the shared queue).
    waiting = [c.submit("a0", "Turn 2 of a0."), _on_the_shared_queue(c, monkeypatch, "a1", "Turn 2 of a1.")]
    _approved(c, c.submit("b0", "Turn 2 of b0."))
    _first_turn(c, "n0")
    for handle in waiting:
        assert handle.status() is TurnStatus.PENDING, c.log_tail()
        records = c.inbox(handle.session_id).records()
        assert [r["kind"] for r in records if r["turn_id"] == handle.turn_id] == ["submitted"]
    assert f"runs on graph version {old}; sent on to queue {c.settings.workers.queue}.{old}" in c.log_tail(100_000)
    told = _doctor(c, "a0")  # the doctor of this (old) agentrt: the session's own version
    assert told.status == "OK" and f"queue {c.settings.workers.queue}.{old}" in told.summary
    queued = store_report(AgentRunner.from_config(c.config), c.tenant).check("worker_queues")
    assert queued.status == "OK" and isinstance(queued.evidence, dict), queued
    assert queued.evidence["queues"] == {c.settings.workers.queue: 0, f"{c.settings.workers.queue}.{old}": 2}

    c.start_worker("wa", concurrency=1)  # both versions side by side: the waiting turns run now
    for handle in waiting:
        _approved(c, handle)
    more = {sid: [c.submit(sid, f"Turn {n} of {sid}.") for n in (2, 3)] for sid in ("b1",)}
    more["a1"] = [c.submit("a1", "Turn 3 of a1.")]
    more["a0"] = [c.submit("a0", "Turn 3 of a0.")]
    more["b0"] = [c.submit("b0", "Turn 3 of b0.")]
    for handles in more.values():
        for handle in handles:
            _approved(c, handle)

    runner = AgentRunner.from_config(c.config)
    for sid in ("a0", "a1", "b0", "b1", "n0"):
        version = session_graph_version(c.settings, c.tenant, sid)
        turns = c.turns(sid)
        assert [t.status for t in turns] == [TurnStatus.COMPLETED] * len(turns), sid
        assert len(turns) == (1 if sid == "n0" else 3), sid
        ran_on = {r["worker"].split("-", 1)[0] for r in c.inbox(sid).records() if r.get("worker")}
        assert {version_of[w] for w in ran_on} == {version}, f"{sid} ({version}) ran on {ran_on}"
        events = runner.manager.event_log(c.tenant, sid).entries()
        started = [e.payload["pins"]["graph_version"] for e in events if e.type == "run_start"]
        assert started == [version] * len(turns), sid
        assert not [e for e in events if e.type == "recovery_blocked"], sid
        assert sum(1 for e in events if e.type == "run_resume") == len(turns), sid  # every approval resumed
        assert int(c.redis.get(f"{c.keys}:bump:{sid}") or 0) == len(turns), sid
    for name, version in version_of.items():
        queue = f"{c.settings.workers.queue}.{version}"
        assert f"graph version {version}, also consuming {queue}" in c.log_tail(100_000), name

    # b1's last turn pauses on the new version's worker, which then stops: the approval waits for
    # a worker of that version, and the doctor says which.
    left = c.submit("b1", "Turn 4 of b1.")
    assert left.wait(timeout=BOUND_S).status is TurnStatus.PAUSED
    _stop(c, "wb")
    submit_decision(c.settings, "b1", APPROVE, c.tenant)
    told = _doctor(c, "b1")
    assert told.status == "WARN", told
    assert told.summary.startswith(f"1 unfinished turn(s) run only on a worker of graph version {new}"), told
    assert f"workers.adopt_graph_versions: [{new}]" in told.next_step
    assert left.status() is TurnStatus.PENDING

    # The operator lets a worker of the other version adopt it: the run resumes there, the graph change accepted.
    adopting = yaml.safe_load(c.config.read_text())
    adopting["workers"]["adopt_graph_versions"] = [new]
    (c.tmp / "adopt.yaml").write_text(yaml.safe_dump(adopting))
    c.start_worker("wc", concurrency=1, config=c.tmp / "adopt.yaml")
    done = left.wait(timeout=BOUND_S)
    assert done.status is TurnStatus.COMPLETED, (done.to_json(), c.log_tail())
    assert str(done.result["worker"]).startswith("wc-"), done.to_json()
    events = runner.manager.event_log(c.tenant, "b1").entries()
    assert not [e for e in events if e.type == "recovery_blocked"]
    (override,) = [e.payload for e in events if e.type == "recovery_override"]
    assert override["operator"] == "workers.adopt_graph_versions"
    # the surface digest covers the graph version too: accepted only because nothing else in it changed
    assert override["accepted"]["graph_version"] == {"was": new, "now": old}
    assert sorted(override["accepted"]) == ["graph_version", "surface_digest"]
    assert session_graph_version(c.settings, c.tenant, "b1") == old  # its next turns go to the old version's queue
